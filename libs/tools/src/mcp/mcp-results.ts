import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import type { ToolOutcome } from '../discovery';

/** A binary a tool returned, stored as a file instead of inlined into events and prompts. */
export interface StoredAttachment {
  type: 'image' | 'audio' | 'resource';
  mime_type: string;
  bytes: number;
  /** absolute path of the file, named by the sha256 of its bytes */
  file: string;
  /** a resource's URI, when the server named one */
  uri?: string;
}

const EXTENSIONS: Readonly<Record<string, string>> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/gif': 'gif',
  'image/webp': 'webp',
  'image/svg+xml': 'svg',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/mpeg': 'mp3',
  'audio/ogg': 'ogg',
  'application/pdf': 'pdf',
  'application/gzip': 'gz',
  'application/zip': 'zip',
};

/**
 * Where MCP binaries go: one file per content, `<sha256>.<ext>` in one folder (the data folder's
 * `mcp-blobs`), written once; the same bytes always name the same file.
 */
export class McpBlobStore {
  constructor(readonly dir: string) {}

  store(base64: string, mimeType: string): { file: string; bytes: number } {
    const data = Buffer.from(base64, 'base64');
    const digest = createHash('sha256').update(data).digest('hex');
    const file = path.join(this.dir, `${digest}.${EXTENSIONS[mimeType.toLowerCase()] ?? 'bin'}`);
    if (!existsSync(file)) {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      writeFileSync(file, data, { mode: 0o600 });
    }
    return { file, bytes: data.length };
  }
}

/** The parts of an MCP CallToolResult read here (the SDK's type, loosely: servers send more). */
export interface McpCallResult {
  content?: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
}

type Block = Record<string, unknown> & { type?: unknown };
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/**
 * An MCP tool result as a ToolOutcome. Text stays text; structured content is kept as is; images,
 * audio and binary resources are stored as files and described by a line of text (type, size,
 * where), never inlined. The output is the text alone when that is all there is.
 */
export function toToolOutcome(result: McpCallResult, blobs: McpBlobStore): ToolOutcome {
  const lines: string[] = [];
  const attachments: StoredAttachment[] = [];
  const keep = (type: StoredAttachment['type'], data: string, mime: string, uri?: string) => {
    const { file, bytes } = blobs.store(data, mime || 'application/octet-stream');
    attachments.push({
      type,
      mime_type: mime || 'application/octet-stream',
      bytes,
      file,
      ...(uri ? { uri } : {}),
    });
    lines.push(
      `[${type} ${mime || 'binary'}, ${bytes} bytes${uri ? ` (${uri})` : ''}, stored at ${file}; not shown]`,
    );
  };
  for (const raw of result.content ?? []) {
    const block = (raw ?? {}) as Block;
    switch (block.type) {
      case 'text':
        lines.push(str(block.text));
        break;
      case 'image':
      case 'audio':
        keep(block.type, str(block.data), str(block.mimeType));
        break;
      case 'resource': {
        const r = (block.resource ?? {}) as Block;
        if (typeof r.text === 'string') lines.push(`[resource ${str(r.uri)}]\n${r.text}`);
        else keep('resource', str(r.blob), str(r.mimeType), str(r.uri));
        break;
      }
      case 'resource_link':
        lines.push(`[resource link ${str(block.uri)}${block.name ? ` (${str(block.name)})` : ''}]`);
        break;
      default:
        lines.push(`[content of type ${String(block.type)} left out]`);
    }
  }
  const text = lines.join('\n');
  const structured = result.structuredContent;
  const output =
    structured === undefined && attachments.length === 0
      ? text
      : {
          text,
          ...(structured !== undefined ? { structured_content: structured } : {}),
          ...(attachments.length > 0 ? { attachments } : {}),
        };
  return result.isError
    ? { ok: false, output, error: text || 'the MCP tool reported an error' }
    : { ok: true, output, error: null };
}
