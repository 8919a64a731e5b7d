import { z } from 'zod';
import { Budgets, OnBusy } from '@runledger/contracts';
import { placeholdersOf, valuePathProblem } from './hook-template';

/** Signature schemes a hook may be configured with by name (see docs/time.md#webhooks). */
export const HOOK_SIGNATURE_STYLES = ['runledger', 'github', 'stripe'] as const;

/** Any other provider: an HMAC of the raw body in a header of its own, hex or base64, after an optional prefix. */
export const CustomHookSignature = z
  .object({
    header: z
      .string()
      .regex(/^[A-Za-z0-9-]{1,100}$/, 'must be a header name')
      .transform((h) => h.toLowerCase()),
    algorithm: z.enum(['sha256', 'sha1', 'sha512']).default('sha256'),
    encoding: z.enum(['hex', 'base64']).default('hex'),
    /** text before the MAC in the header, e.g. `sha256=` */
    prefix: z.string().max(50).default(''),
  })
  .strict();
export type CustomHookSignature = z.infer<typeof CustomHookSignature>;

export const HookSignature = z.union([z.enum(HOOK_SIGNATURE_STYLES), CustomHookSignature]);
export type HookSignature = z.infer<typeof HookSignature>;

/** a template: text with `{{body.a.b}}`, `{{headers.x-name}}`, `{{delivery_id}}` or `{{hook}}` filled in per delivery */
const Template = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .superRefine((template, ctx) => {
      for (const path of placeholdersOf(template)) {
        const problem = valuePathProblem(path);
        if (problem) ctx.addIssue({ code: 'custom', message: `{{${path}}}: ${problem}` });
      }
    });

/** What a delivery becomes: a new task whose input (and session) are filled from it. */
export const HookTaskAction = z
  .object({
    input: Template(100_000),
    session_id: Template(200).optional(),
    budgets: Budgets.optional(),
    /** for a session with an unfinished task: instead of the session's strategy */
    on_busy: OnBusy.optional(),
  })
  .strict();

/** What a delivery becomes: a signal to a task it names (in its body or a header). */
export const HookSignalAction = z
  .object({
    task_id: Template(200),
    name: Template(100),
    /** the signal's payload: `body` (default), `headers`, or a value in them (`body.workflow_run`) */
    payload: z
      .string()
      .default('body')
      .superRefine((path, ctx) => {
        const problem = valuePathProblem(path);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
  })
  .strict();

/**
 * One inbound webhook, `POST /hooks/<name>`: verified with the HMAC secret held by the environment
 * variable `secret_env` (never written in the configuration), deduplicated by its delivery id, and
 * turned into a task or a signal. `when`: values the delivery must have (`"headers.x-github-event":
 * "push"`, a list for any of several); a delivery that does not match is recorded as ignored.
 */
export const InboundHookConfig = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$/, 'letters, digits, _ and - (at most 100)'),
    secret_env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be the name of an environment variable'),
    secret: z
      .never({
        error: 'secrets are not accepted here: name the environment variable that holds it in secret_env',
      })
      .optional(),
    signature: HookSignature.default('runledger'),
    /** timestamped schemes (runledger, stripe): how far the signed time may be from the server's clock */
    tolerance_s: z.number().int().min(1).max(86_400).default(300),
    /** the header naming the delivery (a provider's retry repeats it); default: the scheme's own, else Idempotency-Key */
    delivery_header: z
      .string()
      .regex(/^[A-Za-z0-9-]{1,100}$/, 'must be a header name')
      .transform((h) => h.toLowerCase())
      .optional(),
    when: z
      .record(z.string(), z.union([z.string(), z.array(z.string()).min(1)]))
      .superRefine((when, ctx) => {
        for (const path of Object.keys(when)) {
          const problem = valuePathProblem(path);
          if (problem) ctx.addIssue({ code: 'custom', path: [path], message: problem });
        }
      })
      .optional(),
    task: HookTaskAction.optional(),
    signal: HookSignalAction.optional(),
  })
  .strict()
  .refine((h) => (h.task === undefined) !== (h.signal === undefined), {
    error: 'a hook maps its deliveries to exactly one of "task" or "signal"',
  });
export type InboundHookConfig = z.infer<typeof InboundHookConfig>;

export const InboundHooksConfig = z
  .array(InboundHookConfig)
  .max(100)
  .refine((hooks) => new Set(hooks.map((h) => h.name)).size === hooks.length, 'hook names must be unique');
