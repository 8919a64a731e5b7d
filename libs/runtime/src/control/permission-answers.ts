import {
  EventPayload,
  MCP_ELICITATION_RULE,
  PermissionDecision,
  ValidationError,
} from '@runledger/contracts';
import { checkElicitationContent } from '@runledger/tools';

/** The content an answer to a permission request carries: only an MCP server's form takes one, and only when accepted. */
export function formAnswer(
  pending: EventPayload<'TASK_AWAITING_PERMISSION'>,
  decision: PermissionDecision,
  content: Record<string, unknown> | undefined,
): Record<string, unknown> | undefined {
  if (pending.rule !== MCP_ELICITATION_RULE) {
    if (content !== undefined)
      throw new ValidationError(
        "content answers an MCP server's form only; this request asks for a decision",
      );
    return undefined;
  }
  if (decision === 'deny') {
    if (content !== undefined) throw new ValidationError('a declined form takes no content');
    return undefined;
  }
  if (decision !== 'allow_once')
    throw new ValidationError(
      `an MCP server's form is answered allow_once (with its content) or deny, not ${decision}`,
    );
  const schema = (pending.args.requested_schema ?? {}) as Record<string, unknown>;
  const checked = checkElicitationContent(schema, content ?? {});
  if (!checked.ok)
    throw new ValidationError(`the content does not fill the form: ${checked.problem}`, {
      requested_schema: schema,
    });
  return checked.content;
}
