import { z } from 'zod';
import { EventTypeSchema, RuntimeEventEnvelope } from '@runledger/contracts';
import { Scope } from '../auth/scopes';
import { ErrorResponse } from './error.dto';
import { IdParam } from './zod.pipe';
import { ArchivedRangeSchema } from './events.dto';

const SubscriptionId = z
  .string()
  .regex(/^[A-Za-z0-9_.:-]{1,100}$/, 'must be 1-100 characters of [A-Za-z0-9_.:-]');
const Cursor = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** What a WebSocket client may send. The first message must be `auth` (unless the upgrade carried a bearer header). */
export const WsClientMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auth'), token: z.string().min(1).max(1000) }).strict(),
  z
    .object({
      type: z.literal('subscribe'),
      task_id: IdParam,
      after_seq: Cursor.default(0),
      subscription_id: SubscriptionId.optional(),
      /** also every task it delegated to (and theirs), each from its first event, in order within each task */
      include_children: z.boolean().default(false),
    })
    .strict(),
  z
    .object({
      type: z.literal('subscribe_all'),
      after_position: Cursor.default(0),
      types: z.array(EventTypeSchema).min(1).max(100).optional(),
      task_id: IdParam.optional(),
      subscription_id: SubscriptionId.optional(),
    })
    .strict(),
  z.object({ type: z.literal('unsubscribe'), subscription_id: SubscriptionId }).strict(),
  z.object({ type: z.literal('ping') }).strict(),
]);
export type WsClientMessage = z.output<typeof WsClientMessage>;

/** What the server sends, by `type`. `subscribed` echoes the cursor the subscription starts after. */
export const WsServerMessages = {
  authenticated: z.object({
    type: z.literal('authenticated'),
    name: z.string(),
    scopes: z.array(Scope),
  }),
  subscribed: z.union([
    z.object({
      type: z.literal('subscribed'),
      subscription_id: z.string(),
      task_id: z.string(),
      after_seq: Cursor,
      include_children: z.boolean().optional(),
    }),
    z.object({
      type: z.literal('subscribed'),
      subscription_id: z.string(),
      after_position: Cursor,
      /**
       * the log's head when the subscription started: the replay reaches it, unless it is in an
       * archived range (then the replay's last event is the last live one before it)
       */
      head_position: Cursor,
      /**
       * `archived` tells every archived stretch that starts by this position: the head, or just
       * before the first of more than 100 (a reader pages the rest through /admin/events)
       */
      archived_through: Cursor,
      /** archived stretches of the log after the cursor, through archived_through (docs/retention.md); absent when there are none */
      archived: z.array(ArchivedRangeSchema).optional(),
    }),
  ]),
  /**
   * `subscribe_all` only: an archive batch committed while the subscription runs, its stretch
   * reaching past the subscription's cursor. Events of its tasks at positions the subscriber has not
   * received yet do not come on the subscription; a subscriber whose last event's position is at or
   * past `last_position` already has them all (docs/retention.md).
   */
  archived: z.object({
    type: z.literal('archived'),
    subscription_id: z.string(),
    /** the position of the TASKS_ARCHIVED event that recorded the batch */
    position: Cursor,
    archived: z.array(ArchivedRangeSchema),
  }),
  unsubscribed: z.object({ type: z.literal('unsubscribed'), subscription_id: z.string() }),
  event: z.object({ type: z.literal('event'), subscription_id: z.string(), event: RuntimeEventEnvelope }),
  pong: z.object({ type: z.literal('pong') }),
  error: ErrorResponse.extend({ type: z.literal('error') }),
} as const;
export type WsServerMessage = {
  [K in keyof typeof WsServerMessages]: z.input<(typeof WsServerMessages)[K]>;
}[keyof typeof WsServerMessages];
