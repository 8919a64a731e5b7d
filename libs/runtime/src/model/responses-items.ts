import { createHash } from 'node:crypto';
import { ModelContinuation, ModelToolCall } from '@runledger/contracts';
import { ChatMessage, ContinuationAnchor } from './model-backend';

/**
 * A conversation in the Responses API's input items, and the decision whether
 * a request can continue a stored response (`previous_response_id`) or must
 * send everything. Pure: the backend sends, the log records.
 */

export type InputItem =
  | { type: 'message'; role: 'system' | 'user' | 'assistant'; content: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: string }
  | { type: 'function_call_output'; call_id: string; output: string };

export interface ResponsesInput {
  /** the leading system messages: sent as `instructions` on every request, since a stored response does not carry them over */
  instructions: string | null;
  items: InputItem[];
}

function itemsOf(m: ChatMessage): InputItem[] {
  if (m.role === 'tool')
    return [{ type: 'function_call_output', call_id: m.tool_call_id, output: m.content }];
  if (m.role !== 'assistant') return [{ type: 'message', role: m.role, content: m.content }];
  return [
    ...(m.content ? [{ type: 'message' as const, role: 'assistant' as const, content: m.content }] : []),
    ...(m.tool_calls ?? []).map((c): InputItem => ({
      type: 'function_call',
      call_id: c.id,
      name: c.name,
      arguments: c.arguments,
    })),
  ];
}

export function toResponsesInput(messages: readonly ChatMessage[]): ResponsesInput {
  let lead = 0;
  while (lead < messages.length && messages[lead].role === 'system') lead += 1;
  const system = messages.slice(0, lead).map((m) => m.content);
  return {
    instructions: system.length > 0 ? system.join('\n\n') : null,
    items: messages.slice(lead).flatMap(itemsOf),
  };
}

/** A reply as the items the server stored for it, in the shape the next request would send them. */
export const replyItems = (content: string, tool_calls: readonly ModelToolCall[] | undefined): InputItem[] =>
  itemsOf({ role: 'assistant', content, tool_calls: tool_calls ? [...tool_calls] : undefined });

export const itemsHash = (items: readonly InputItem[]): string =>
  `sha256:${createHash('sha256').update(JSON.stringify(items)).digest('hex')}`;

export type ContinuationPlan = Pick<
  ModelContinuation,
  'previous_response_id' | 'stateless_reason' | 'detail'
> & {
  /** the items the request sends: those after the anchor, or all of them */
  send: InputItem[];
};

export const statelessPlan = (
  items: InputItem[],
  reason: NonNullable<ModelContinuation['stateless_reason']>,
  detail: string,
): ContinuationPlan => ({ previous_response_id: null, stateless_reason: reason, detail, send: items });

/**
 * Continue the anchor's response when the conversation still begins with exactly the items it
 * saw and has something after them; else send everything and say why.
 */
export function planContinuation(
  items: InputItem[],
  anchor: ContinuationAnchor | null | undefined,
): ContinuationPlan {
  if (!anchor) return statelessPlan(items, 'missing', 'no earlier response in this conversation');
  if (!anchor.response_id)
    return statelessPlan(items, 'missing', 'the earlier response has no id (the server did not store it)');
  if (anchor.item_count >= items.length)
    return statelessPlan(
      items,
      'stale',
      `the conversation has ${items.length} items, the earlier response saw ${anchor.item_count}: nothing follows it`,
    );
  if (itemsHash(items.slice(0, anchor.item_count)) !== anchor.items_hash)
    return statelessPlan(
      items,
      'stale',
      `the first ${anchor.item_count} items differ from those response ${anchor.response_id} saw`,
    );
  return {
    previous_response_id: anchor.response_id,
    stateless_reason: null,
    detail: null,
    send: items.slice(anchor.item_count),
  };
}

/** The record of a call: what it sent and continued, and the anchor it leaves for the next one. */
export function continuationRecord(
  items: InputItem[],
  plan: ContinuationPlan,
  reply: { response_id: string | null; content: string; tool_calls?: readonly ModelToolCall[] },
): ModelContinuation {
  const seen = [...items, ...replyItems(reply.content, reply.tool_calls)];
  return {
    response_id: reply.response_id,
    items_hash: itemsHash(seen),
    item_count: seen.length,
    previous_response_id: plan.previous_response_id,
    sent_items: plan.send.length,
    stateless_reason: plan.stateless_reason,
    detail: plan.detail,
  };
}
