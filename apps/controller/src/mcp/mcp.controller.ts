import { Controller, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Request, Response } from 'express';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, TaskViews } from '@runledger/runtime';
import { AuthenticatedRequest } from '../auth/auth.guard';
import { RequireToken } from '../auth/scopes';
import { API_VERSION } from '../docs/api-docs';
import { createRunledgerMcpServer } from './runledger-mcp-server';

/**
 * `/mcp`: Runledger as an MCP server over Streamable HTTP, stateless (each POST carries its own
 * JSON-RPC exchange, so any instance answers any request and nothing is kept between them). Every
 * request needs a bearer token; each tool checks the scope its HTTP route needs. GET and DELETE
 * (sessions, server-sent streams) are not offered: 405.
 */
@ApiExcludeController()
@Controller('mcp')
export class McpController {
  constructor(
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(TaskViews) private readonly tasks: TaskViews,
    @Inject(EventStore) private readonly store: EventStore,
  ) {}

  @Post()
  @RequireToken()
  async handle(@Req() req: Request & AuthenticatedRequest, @Res() res: Response): Promise<void> {
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
