import { Controller, Inject, OnApplicationShutdown, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { createMcpHandler, type AuthInfo, type McpHttpHandler } from '@modelcontextprotocol/server';
import type { Request, Response } from 'express';
import { Logger } from 'pino';
import { ForbiddenError } from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskTree, TaskViews } from '@runledger/runtime';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { originOf } from '../auth/protected-resource';
import { Principal, RequireToken, Scope } from '../auth/scopes';
import { API_VERSION } from '../docs/api-docs';
import { APP_CONFIG, AppConfig } from '../config';
import { LOGGER } from '../tokens';
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

/** The principal travels to the server factory as the SDK's auth info; the token itself stays here. */
const authInfoOf = (p: Principal): AuthInfo => ({ token: '', clientId: p.name, scopes: [...p.scopes] });
const principalOf = (auth: AuthInfo | undefined): Principal => ({
  name: auth?.clientId ?? '',
  scopes: (auth?.scopes ?? []) as Scope[],
});

/** The express request as the web Request the SDK's handler serves (its body already parsed). */
function toWebRequest(req: Request, origin: string): globalThis.Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers))
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  return new globalThis.Request(`${origin}${req.originalUrl}`, { method: req.method, headers });
}

/**
 * `/mcp`: Runledger as an MCP server over Streamable HTTP, stateless: MCP 2026-07-28 (no
 * handshake, the protocol version in each request's `_meta`, `server/discover`) and, for
 * 2025-11-25 clients, the SDK's stateless fallback; any instance answers any request and nothing
 * is kept between them. Every request needs a bearer token; each tool checks the scope its HTTP
 * route needs. GET and DELETE (sessions, server-sent streams) are not offered: 405. Bound to a
 * loopback address, it refuses requests whose Host or Origin names another machine (403), as the
 * MCP spec asks of local servers.
 */
@ApiExcludeController()
@Controller('mcp')
export class McpController implements OnApplicationShutdown {
  private readonly handler: McpHttpHandler;
  /** bound to this machine only: a page elsewhere must not reach /mcp through a name that resolves here */
  private readonly loopbackOnly: boolean;

  constructor(
    @Inject(RuntimeController) runtime: RuntimeController,
    @Inject(TaskViews) tasks: TaskViews,
    @Inject(TaskTree) tree: TaskTree,
    @Inject(EventStore) store: EventStore,
    @Inject(APP_CONFIG) config: AppConfig,
    @Inject(LOGGER) log: Logger,
  ) {
    this.loopbackOnly = isLoopbackHost(config.HOST);
    const deps = { runtime, tasks, tree, store, version: API_VERSION };
    this.handler = createMcpHandler(
      (ctx) =>
        createRunledgerMcpServer(
          {
            principal: principalOf(ctx.authInfo),
            origin: ctx.requestInfo ? new URL(ctx.requestInfo.url).origin : '',
            era: ctx.era,
          },
          deps,
        ),
      {
        onerror: (err) => log.debug({ err: err.message }, 'MCP request refused'),
      },
    );
  }

  @Post()
  @RequireToken()
  async handle(@Req() req: Request & AuthenticatedRequest, @Res() res: Response): Promise<void> {
    if (this.loopbackOnly && !fromLoopbackPage(req))
      throw new ForbiddenError('the Host or Origin of this request is not this machine (DNS rebinding)', {
        host: req.headers.host ?? null,
        origin: req.headers.origin ?? null,
      });
    const origin = originOf({ host: req.headers.host, secure: req.protocol === 'https' });
    const answer = await this.handler.fetch(toWebRequest(req, origin), {
      authInfo: authInfoOf(req.principal!),
      parsedBody: req.body,
    });
    res.status(answer.status);
    answer.headers.forEach((value, name) => res.setHeader(name, value));
    res.end(Buffer.from(await answer.arrayBuffer()));
  }

  onApplicationShutdown(): Promise<void> {
    return this.handler.close();
  }
}
