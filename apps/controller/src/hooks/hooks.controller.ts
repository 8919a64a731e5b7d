import { Controller, Get, HttpCode, Inject, Param, Post, Req } from '@nestjs/common';
import { ApiHeader, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request } from 'express';
import { Public, RequireScope } from '../auth/scopes';
import { ApiErrors, jsonSchemaOf } from '../docs/api-docs';
import { HookListResponseDto, HookNameParam, HookReceiptResponseDto } from '../dtos/hooks.dto';
import { ZodPipe } from '../dtos/zod.pipe';
import { HookReceipt, HookView, InboundHooks } from './inbound-hooks';

/** A request's headers, one string each (repeated ones joined as HTTP joins them). */
const headersOf = (req: Request): Record<string, string> =>
  Object.fromEntries(
    Object.entries(req.headers).flatMap(([name, value]) =>
      value === undefined ? [] : [[name, Array.isArray(value) ? value.join(', ') : value]],
    ),
  );

/** Inbound webhooks, configured by RUNLEDGER_HOOKS (see docs/time.md#webhooks). */
@ApiTags('hooks')
@Controller('hooks')
export class HooksController {
  constructor(@Inject(InboundHooks) private readonly hooks: InboundHooks) {}

  @Get()
  @RequireScope('tasks:read')
  @ApiOperation({
    operationId: 'listHooks',
    summary: 'The configured inbound webhooks (never their secrets)',
  })
  @ApiResponse({ status: 200, description: 'the hooks', type: HookListResponseDto.Output })
  list(): { hooks: HookView[] } {
    return { hooks: this.hooks.list() };
  }

  @Post(':name')
  @Public()
  @HttpCode(202)
  @ApiParam({ name: 'name', schema: jsonSchemaOf(HookNameParam) })
  @ApiHeader({
    name: 'Runledger-Signature',
    required: false,
    description:
      "the hook's signature header (by its scheme: Runledger-Signature, Stripe-Signature, X-Hub-Signature-256, or one configured)",
  })
  @ApiHeader({
    name: 'Runledger-Delivery',
    required: false,
    description:
      "the delivery's id (by its scheme: Runledger-Delivery, X-GitHub-Delivery, Stripe's event id, a configured header, or Idempotency-Key; else the body's SHA-256)",
  })
  @ApiOperation({
    operationId: 'receiveHook',
    summary:
      "A webhook delivery: verified with the hook's HMAC secret (no bearer token), then a task or a signal",
    description:
      "The raw body is verified against the signature header of the hook's scheme. A delivery id received before is answered from its record (duplicate: true) and starts no second task, sends no second signal.",
  })
  @ApiResponse({
    status: 202,
    description: 'acted on and recorded, or answered from the record',
    type: HookReceiptResponseDto.Output,
  })
  @ApiErrors({
    400: 'a body that is not JSON, or that lacks a value the mapping names; invalid task or signal',
    401: 'a missing or wrong signature, or a signed time outside the tolerance',
    404: "no such hook; the signal's task does not exist",
    409: "the signal's task has ended; the delivery id was recorded with another body; the session rejects the task",
    413: 'body too large',
  })
  receive(
    @Param('name', new ZodPipe(HookNameParam, 'name')) name: string,
    @Req() req: Request,
  ): Promise<HookReceipt> {
    const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
    return this.hooks.receive(name, raw, headersOf(req));
  }
}
