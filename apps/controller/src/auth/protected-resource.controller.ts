import { Controller, Get, Req } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request } from 'express';
import { Public } from './scopes';
import { PROTECTED_RESOURCE_PATH, originOf, protectedResourceMetadata } from './protected-resource';

const originOfRequest = (req: Request) =>
  originOf({ host: req.headers.host, secure: req.protocol === 'https' });

/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728), public: for the service and for `/mcp`, whose
 * path-suffixed form MCP clients ask for first.
 */
@ApiExcludeController()
@Controller(PROTECTED_RESOURCE_PATH.slice(1))
export class ProtectedResourceController {
  @Get()
  @Public()
  service(@Req() req: Request): Record<string, unknown> {
    return protectedResourceMetadata(originOfRequest(req));
  }

  @Get('mcp')
  @Public()
  mcp(@Req() req: Request): Record<string, unknown> {
    return protectedResourceMetadata(originOfRequest(req), '/mcp');
  }
}
