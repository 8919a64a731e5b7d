import { createZodDto } from './zod-dto';
import { z } from 'zod';
import { PermissionDecision, TaskStatus } from '@runledger/contracts';

export const ResolvePermissionBody = z
  .object({
    decision: PermissionDecision,
    content: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("an MCP server's form (rule mcp_elicitation) answered allow_once: the fields filled in"),
  })
  .strict();
export class ResolvePermissionDto extends createZodDto(ResolvePermissionBody) {}

/** The value is handed to the runtime for one step and never stored, logged or echoed. */
export const ProvideSecretBody = z.object({ secret: z.string().min(1).max(65_536) }).strict();
export class ProvideSecretDto extends createZodDto(ProvideSecretBody) {}

/** A cancel takes no fields; a body, if sent, must be an empty object (unknown fields are refused). */
export const CancelBody = z.object({}).strict().optional();
export class CancelDto extends createZodDto(CancelBody.unwrap()) {}

export const ResolutionResponse = z.object({
  task_id: z.string(),
  request_id: z.string(),
  status: TaskStatus,
});
export class ResolutionResponseDto extends createZodDto(ResolutionResponse) {}
export const CancelResponse = z.object({ task_id: z.string(), status: TaskStatus });
export class CancelResponseDto extends createZodDto(CancelResponse) {}
