import type { ToolLogger } from '../tool-logger';
import type { ToolSandbox } from '../sandbox';
import { McpServerConfig } from './mcp-config';
import { McpBlobStore } from './mcp-results';
import { McpServerConnection, McpServerStatus, McpToolEntry } from './mcp-server-connection';

export interface McpClientOptions {
  servers: readonly McpServerConfig[];
  sandbox: ToolSandbox;
  /** where images, audio and binary resources are stored (the data folder's mcp-blobs) */
  blobDir: string;
  /** never visible to a stdio server (the service's data folder) */
  privateFolders?: readonly string[];
  /** where env_from and headers_from are read, at every (re)start */
  env: NodeJS.ProcessEnv;
  logger: ToolLogger;
  backoffMs?: number;
  maxBackoffMs?: number;
  startTimeoutMs?: number;
}

/** A server's tool, with the connection that calls it. */
export interface McpTool {
  entry: McpToolEntry;
  server: McpServerConnection;
}

/**
 * The configured MCP servers: started together at boot (a server that fails is reported and
 * retried, never stops the boot), their tools by registry name, their status. Closed with the
 * application, which ends the child processes.
 */
export class McpClientManager {
  private readonly connections: McpServerConnection[];
  private index = new Map<string, McpTool>();

  constructor(options: McpClientOptions) {
    const blobs = new McpBlobStore(options.blobDir);
    // The variables are copied now: the service drops keys from its environment once it is composed.
    const env = { ...options.env };
    this.connections = options.servers.map(
      (config) =>
        new McpServerConnection(config, {
          sandbox: options.sandbox,
          blobs,
          env,
          logger: options.logger,
          privateFolders: options.privateFolders,
          onToolsChanged: () => this.reindex(),
          backoffMs: options.backoffMs,
          maxBackoffMs: options.maxBackoffMs,
          startTimeoutMs: options.startTimeoutMs,
        }),
    );
  }

  async start(): Promise<void> {
    await Promise.all(this.connections.map((c) => c.start()));
  }

  tools(): McpTool[] {
    return [...this.index.values()];
  }

  get(name: string): McpTool | undefined {
    return this.index.get(name);
  }

  status(): McpServerStatus[] {
    return this.connections.map((c) => c.status());
  }

  /** Nest's hook: the child processes end with the application. */
  beforeApplicationShutdown(): Promise<void> {
    return this.close();
  }

  async close(): Promise<void> {
    await Promise.all(this.connections.map((c) => c.close()));
    this.index.clear();
  }

  private reindex(): void {
    const index = new Map<string, McpTool>();
    for (const server of this.connections)
      for (const entry of server.tools()) index.set(entry.manifest.name, { entry, server });
    this.index = index;
  }
}
