import type { AddressInfo } from 'node:net';
import { All, Controller, Get, Inject, Post, Req, Res } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { ApiExcludeController } from '@nestjs/swagger';
import { AgentCard } from '@a2a-js/sdk';
import { agentCardHandler, jsonRpcHandler, restHandler } from '@a2a-js/sdk/server/express';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { EventBus, EventStore } from '@runledger/event-store';
import { AgentCatalog, RuntimeController, TaskTree, TaskViews } from '@runledger/runtime';
import { ToolRegistry, ToolSandbox } from '@runledger/tools';
import { AuthenticatedRequest, requireScope } from '../auth/auth.guard';
import { Public, RequireToken } from '../auth/scopes';
import { scopeOfJsonRpc, scopeOfRest } from './a2a-scopes';
import { APP_CONFIG, AppConfig } from '../config';
import { API_VERSION } from '../docs/api-docs';
import { OutboundDeliveries } from '../outbound/outbound-deliveries';
import { eventSourceOf } from '../streaming/follow-events';
import {
  A2A_JSONRPC_PATH,
  A2A_REST_PATH,
  AGENT_CARD_ROUTE,
  buildAgentCard,
  buildExtendedAgentCard,
  isLegacyA2AVersion,
} from './agent-card';

/** How long a client may keep the public card. */
const CARD_MAX_AGE_S = 300;
import { A2ACaller, RunledgerA2AHandler } from './runledger-a2a-handler';
import { WrittenFileArtifacts, readWritten } from './written-file-artifacts';

/**
 * A2A 1.0 at this service's own URL: the agent card (public), the JSON-RPC binding at /a2a/jsonrpc
 * and HTTP+JSON under /a2a/rest, both through the SDK's transport handlers over one
 * RunledgerA2AHandler. Every call needs a bearer token; its scope is checked per method here, before
 * the SDK sees the request.
 */
@ApiExcludeController()
@Controller()
export class A2AController {
  private readonly handler: RunledgerA2AHandler;
  private readonly jsonRpc: RequestHandler;
  private readonly rest: RequestHandler;
  private readonly legacyCard: RequestHandler;
  private readonly catalog: AgentCatalog;

  constructor(
    @Inject(RuntimeController) runtime: RuntimeController,
    @Inject(TaskViews) tasks: TaskViews,
    @Inject(TaskTree) tree: TaskTree,
    @Inject(EventStore) store: EventStore,
    @Inject(EventBus) bus: EventBus,
    @Inject(OutboundDeliveries) outbound: OutboundDeliveries,
    @Inject(ToolSandbox) sandbox: ToolSandbox,
    @Inject(ToolRegistry) tools: ToolRegistry,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @Inject(HttpAdapterHost) private readonly http: HttpAdapterHost,
  ) {
    this.catalog = new AgentCatalog(config.RUNLEDGER_AGENTS ?? []);
    this.handler = new RunledgerA2AHandler({
      runtime,
      tasks,
      tree,
      store,
      events: eventSourceOf(store, bus),
      outbound,
      card: () => this.card(),
      extendedCard: (caller) => buildExtendedAgentCard(this.card(), tools.list(), caller),
      files: new WrittenFileArtifacts(store, tree, (path) => readWritten(sandbox, path)),
    });
    const userBuilder = (req: Request) =>
      Promise.resolve(
        new A2ACaller(
          (req as Request & AuthenticatedRequest).principal!.name,
          (req as Request & AuthenticatedRequest).principal!.scopes,
          closedSignal(req),
        ),
      );
    // 0.3 clients (no A2A-Version header, or 0.3) are answered by the SDK's compat layer over the same handler
    const legacyCompat = { enabled: true };
    this.jsonRpc = jsonRpcHandler({ requestHandler: this.handler, userBuilder, legacyCompat });
    this.rest = restHandler({ requestHandler: this.handler, userBuilder, legacyCompat });
    this.legacyCard = agentCardHandler({
      agentCardProvider: () => Promise.resolve(this.card()),
      legacyCompat,
      cache: { maxAge: CARD_MAX_AGE_S },
    });
  }

  card(): AgentCard {
    return buildAgentCard({
      baseUrl: this.config.RUNLEDGER_PUBLIC_URL ?? this.ownUrl(),
      version: API_VERSION,
      orchestratorModel: orchestratorModelOf(this.config),
      agents: this.catalog.list(),
    });
  }

  /** The 1.0 card; the 0.3 shape (with the 1.0 interfaces embedded) for a request without A2A-Version or with 0.3. */
  @Get(AGENT_CARD_ROUTE)
  @Public()
  async agentCard(@Req() req: Request, @Res() res: Response): Promise<void> {
    if (isLegacyA2AVersion(req.header('A2A-Version') ?? undefined)) {
      req.url = '/';
      return runMiddleware(this.legacyCard, req, res);
    }
    res
      .set('Cache-Control', `public, max-age=${CARD_MAX_AGE_S}`)
      .append('Vary', 'A2A-Version')
      .json(AgentCard.toJSON(this.card()));
  }

  @Post(A2A_JSONRPC_PATH.slice(1))
  @RequireToken()
  async jsonRpcCall(@Req() req: Request & AuthenticatedRequest, @Res() res: Response): Promise<void> {
    requireScope(req.principal!, scopeOfJsonRpc(req.body));
    // the SDK's router answers at its own root, as if mounted here
    req.url = '/';
    await runMiddleware(this.jsonRpc, req, res);
  }

  @All(`${A2A_REST_PATH.slice(1)}/{*path}`)
  @RequireToken()
  async restCall(@Req() req: Request & AuthenticatedRequest, @Res() res: Response): Promise<void> {
    const path = req.path.slice(A2A_REST_PATH.length) || '/';
    requireScope(req.principal!, scopeOfRest(req.method, path, req.body));
    req.url = req.url.slice(A2A_REST_PATH.length) || '/';
    await runMiddleware(this.rest, req, res);
  }

  private ownUrl(): string {
    const address = this.http.httpAdapter?.getHttpServer()?.address() as AddressInfo | null;
    const host = this.config.HOST.includes(':') ? `[${this.config.HOST}]` : this.config.HOST;
    return `http://${host}:${address?.port ?? this.config.PORT}`;
  }
}

/** the orchestrator's model as the card names it: sys_util (no model), the scripted file, or the named model */
export const orchestratorModelOf = (c: AppConfig): string =>
  c.RUNLEDGER_MODEL === 'openai'
    ? (c.RUNLEDGER_MODEL_ORCHESTRATOR ?? 'openai')
    : c.RUNLEDGER_MODEL.startsWith('scripted')
      ? 'scripted'
      : c.RUNLEDGER_MODEL;

/** aborts once the response is over: finished, or the client went away */
function closedSignal(req: Request): AbortSignal {
  const ctrl = new AbortController();
  req.res?.once('close', () => ctrl.abort());
  return ctrl.signal;
}

function runMiddleware(handler: RequestHandler, req: Request, res: Response): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    res.once('close', () => resolve());
    res.once('finish', () => resolve());
    void handler(req, res, ((err?: unknown) => {
      if (err) reject(err instanceof Error ? err : new Error(String(err)));
      else if (!res.headersSent) {
        res
          .status(404)
          .json({ error: 'not_found', message: `no A2A route ${req.method} ${req.path}`, details: {} });
      }
      resolve();
    }) as NextFunction);
  });
}
