import { Controller, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Request, Response } from 'express';
import { ForbiddenError } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskViews } from '@runledger/runtime';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { RequireToken } from '../auth/scopes';
import { API_VERSION } from '../docs/api-docs';
import { APP_CONFIG, AppConfig } from '../config';
import { createRunledgerMcpServer } from './runledger-mcp-server';

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
const isLoopbackHost = (host: string): boolean => LOOPBACK_NAMES.has(host.toLowerCase());

/** The hostname of a Host header or an Origin URL, without its port; null when there is none. */
function hostnameOf(value: string | undefined, isUrl: boolean): string | null {
  if (!value) return null;
  try {
    return new URL(isUrl ? value : `http://${value}`).hostname;
  } catch {
    return '';
  }
}

/** Host (and Origin, when a browser sends one) name this machine. */
function fromLoopbackPage(req: Request): boolean {
  const host = hostnameOf(req.headers.host, false);
  const origin = hostnameOf(req.headers.origin, true);
  return host !== null && isLoopbackHost(host) && (origin === null || isLoopbackHost(origin));
}

/**
 * `/mcp`: Runledger as an MCP server over Streamable HTTP, stateless (each POST carries its own
 * JSON-RPC exchange, so any instance answers any request and nothing is kept between them). Every
 * request needs a bearer token; each tool checks the scope its HTTP route needs. GET and DELETE
 * (sessions, server-sent streams) are not offered: 405. Bound to a loopback address, it refuses
 * requests whose Host or Origin names another machine (403), as the MCP spec asks of local servers.
 */
@ApiExcludeController()
@Controller('mcp')
export class McpController {
  constructor(
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) private readonly store: EventStore,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.loopbackOnly = isLoopbackHost(config.HOST);
  }

  /** bound to this machine only: a page elsewhere must not reach /mcp through a name that resolves here */
  private readonly loopbackOnly: boolean;

  @Post()
  @RequireToken()
  async handle(@Req() req: Request & AuthenticatedRequest, @Res() res: Response): Promise<void> {
    if (this.loopbackOnly && !fromLoopbackPage(req))
      throw new ForbiddenError('the Host or Origin of this request is not this machine (DNS rebinding)', {
        host: req.headers.host ?? null,
        origin: req.headers.origin ?? null,
      });
    const server = createRunledgerMcpServer(req.principal!, {
      runtime: this.runtime,
      tasks: this.tasks,
      store: this.store,
      version: API_VERSION,
    });
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: undefined,
      enableJsonResponse: true,
    });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, req.body);
  }
}
