import { applyDecorators, INestApplication } from '@nestjs/common';
import {
  ApiExtension,
  ApiParam,
  ApiResponse,
  ApiSecurity,
  DocumentBuilder,
  OpenAPIObject,
  SwaggerModule,
} from '@nestjs/swagger';
import { cleanupOpenApiDoc } from 'nestjs-zod';
import { z } from 'zod';
import { ErrorResponseDto } from '../dtos/error.dto';
import { IdParam } from '../dtos/zod.pipe';

export const API_VERSION = '0.1.0';
export const DOCS_PATH = 'docs';
export const OPENAPI_PATH = `${DOCS_PATH}/openapi.json`;
export const ASYNCAPI_PATH = `${DOCS_PATH}/asyncapi.json`;
/** The security scheme every scoped operation names (OpenAPI and AsyncAPI). */
export const BEARER_SCHEME = 'bearer';

/** A zod schema as the JSON Schema the documents embed (the `$schema` key is not allowed there). */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  const { $schema: _dialect, ...json } = z.toJSONSchema(schema, { io, unrepresentable: 'any' });
  return json;
}

/** Error responses of an operation, each `{error, message, details}`, by status with what it means here. */
export const ApiErrors = (errors: Record<number, string>) =>
  applyDecorators(
    ...Object.entries(errors).map(([status, description]) =>
      ApiResponse({ status: Number(status), description, type: ErrorResponseDto }),
    ),
  );

/** Documents what `RequireScope` enforces: the bearer token, the scope, and the refusals. */
export const ApiScope = (scope: string) =>
  applyDecorators(
    ApiSecurity(BEARER_SCHEME, [scope]),
    ApiExtension('x-required-scope', scope),
    ApiErrors({
      401: 'missing or invalid bearer token',
      403: `the token lacks the ${scope} scope`,
      429: 'rate limited (RUNLEDGER_RATE_LIMIT per token per minute); Retry-After says when to retry',
    }),
  );

/** Documents the refusals of an operation that takes new work while the server is saturated. */
export const ApiBackpressure = () => {
  const retryAfter = {
    'Retry-After': { description: 'seconds to wait before trying again', schema: { type: 'integer' } },
  };
  return applyDecorators(
    ApiResponse({
      status: 429,
      description:
        'rate limited (RUNLEDGER_RATE_LIMIT per token per minute), or `queue_full`: RUNLEDGER_QUEUE_MAX tasks already wait to run; nothing was written',
      type: ErrorResponseDto,
      headers: retryAfter,
    }),
    ApiResponse({
      status: 503,
      description:
        '`overloaded`: the event loop lags beyond RUNLEDGER_OVERLOAD_LOOP_DELAY_MS or is busy beyond RUNLEDGER_OVERLOAD_LOOP_UTILIZATION, or RUNLEDGER_SUBMIT_MAX_PENDING submissions wait for the store; nothing was written',
      type: ErrorResponseDto,
      headers: retryAfter,
    }),
  );
};

/**
 * Documents what `Public` allows: the empty requirement `{}`, no token needed
 * (an empty `security` list would be dropped by the generator).
 */
export const ApiNoSecurity = () => ApiSecurity({});

/** A path id (task_..., perm_..., mem_...) with the pattern the server checks. */
export const ApiIdParam = (name: string, description: string) =>
  ApiParam({ name, required: true, description, schema: jsonSchemaOf(IdParam) });

/** The OpenAPI document of every controller route, generated from their decorators and zod DTOs. */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('Runledger API')
    .setVersion(API_VERSION)
    .setDescription(
      'Event-sourced runtime for multi-agent LLM tasks. Every error is `{error, message, details}`. ' +
        'A path that cannot be read (bad percent-encoding) is 400; a path no route has is 404; a method a ' +
        'path does not have is 405 with an `Allow` header; request headers over the server limit are 431. ' +
        'The WebSocket protocol (`/ws`) is ' +
        `described by the AsyncAPI document at /${ASYNCAPI_PATH}.`,
    )
    .addServer('/', 'the server that serves this document')
    .addSecurity(BEARER_SCHEME, {
      type: 'http',
      scheme: 'bearer',
      description:
        'Authorization: Bearer <token>. Scopes: tasks:read, tasks:write, approvals, admin (admin implies all); ' +
        'each operation names the one it needs in its security requirement and in x-required-scope.',
    })
    .build();
  return cleanupOpenApiDoc(SwaggerModule.createDocument(app, config), { version: '3.1' });
}

/** Swagger UI at /docs and the document at /docs/openapi.json, both open (they hold no secret). */
export function mountApiDocs(app: INestApplication): void {
  SwaggerModule.setup(DOCS_PATH, app, () => buildOpenApiDocument(app), {
    raw: ['json'],
    jsonDocumentUrl: OPENAPI_PATH,
    customSiteTitle: 'Runledger API',
  });
}
