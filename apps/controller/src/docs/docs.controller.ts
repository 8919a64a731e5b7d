import { Controller, Get } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import { Public } from '../auth/scopes';
import { buildAsyncApiDocument } from './asyncapi';

/**
 * /docs/asyncapi.json, the WebSocket protocol. Swagger UI (/docs) and the
 * OpenAPI document (/docs/openapi.json) are mounted by `mountApiDocs`, since
 * they are generated from the whole application.
 */
@ApiExcludeController()
@Controller('docs')
export class DocsController {
  private readonly asyncapi = buildAsyncApiDocument();

  @Get('asyncapi.json')
  @Public()
  asyncApi(): Record<string, unknown> {
    return this.asyncapi;
  }
}
