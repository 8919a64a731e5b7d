import { Inject, Injectable } from '@nestjs/common';
import type { z } from 'zod';
import type { ResumeEntry, RunAgentInput } from '@ag-ui/core';
import {
  AgUiRun,
  IllegalStateError,
  NotFoundError,
  RuntimeEvent,
  ValidationError,
} from '@runledger/contracts';
import { EventStore } from '@runledger/event-store';
import { ClientToolAnswer, RuntimeController } from '@runledger/runtime';
import { ToolRegistry } from '@runledger/tools';
import { ProvideSecretBody, ResolvePermissionBody } from '../dtos/approvals.dto';
import { parseOrThrow } from '../dtos/zod.pipe';
import { AgUiRunFrame, parseInterruptId } from './ag-ui-events';
import { ClientToolResultBody, checkOfferedTools, lastUserMessage, runIdempotencyKey } from './ag-ui.dto';

type Answer =
  | { kind: 'permission'; requestId: string; body: z.infer<typeof ResolvePermissionBody> }
  | { kind: 'secret'; requestId: string; secret: string }
  | { kind: 'client_tool'; requestId: string; answer: ClientToolAnswer }
  | { kind: 'cancel' };

/** What a cancelled resume entry for a frontend tool's call tells the model. */
export const CLIENT_TOOL_CANCELLED = 'the client did not run the tool (its interrupt was cancelled)';

/**
 * Turns a RunAgentInput into the task run it streams: a new run submits the last user message as a
 * task of the thread's session (its runId the idempotency key); a run with `resume` entries answers
 * the task's pending requests through the runtime and continues that task. Nothing is kept here:
 * what a run is follows from its input and the log.
 */
@Injectable()
export class AgUiRuns {
  constructor(
    @Inject(RuntimeController) private readonly runtime: RuntimeController,
    @Inject(EventStore) private readonly store: EventStore,
    @Inject(ToolRegistry) private readonly tools: ToolRegistry,
  ) {}

  begin(input: RunAgentInput): Promise<AgUiRunFrame> {
    return input.resume?.length ? this.resume(input, input.resume) : this.start(input);
  }

  private async start(input: RunAgentInput): Promise<AgUiRunFrame> {
    const user = lastUserMessage(input.messages);
    if (user === null)
      throw new ValidationError('invalid body: messages: no user message with text to run', {
        field: 'messages',
      });
    const ag_ui = parseOrThrow(
      AgUiRun,
      {
        thread_id: input.threadId,
        run_id: input.runId,
        context: input.context ?? [],
        ...(input.forwardedProps !== undefined ? { forwarded_props: input.forwardedProps } : {}),
        tools: (input.tools ?? []).map((t) => ({
          name: t.name,
          description: t.description,
          ...(t.parameters !== undefined ? { parameters: t.parameters } : {}),
        })),
        user_message: {
          id: user.message.id,
          content: user.message.content,
          ...(user.message.name !== undefined ? { name: user.message.name } : {}),
        },
      },
      'body',
    );
    checkOfferedTools(
      ag_ui.tools,
      this.tools.list().map((t) => t.name),
    );
    const { task_id } = await this.runtime.submit(
      { input: user.text, session_id: input.threadId },
      { idempotency_key: runIdempotencyKey(input.threadId, input.runId), source: 'api', ag_ui },
    );
    return { threadId: input.threadId, runId: input.runId, taskId: task_id, after: 0 };
  }

  /**
   * Every entry is checked before any is applied, so a bad entry writes nothing. An entry whose
   * request was already answered (the same resume sent again, to reconnect) is passed over.
   */
  private async resume(input: RunAgentInput, entries: ResumeEntry[]): Promise<AgUiRunFrame> {
    const ids = entries.map((entry) => {
      const id = parseInterruptId(entry.interruptId);
      if (!id)
        throw new ValidationError(
          `invalid body: resume: ${JSON.stringify(entry.interruptId)} is not an interrupt of this server`,
          {
            field: 'resume',
          },
        );
      return id;
    });
    const taskIds = [...new Set(ids.map((i) => i.taskId))];
    if (taskIds.length > 1)
      throw new ValidationError('invalid body: resume: the entries answer interrupts of different runs', {
        field: 'resume',
        task_ids: taskIds,
      });
    const [taskId] = taskIds;
    const log = await this.store.readWholeStream(taskId);
    if (log.length === 0) throw new NotFoundError(`task ${taskId} not found`, { task_id: taskId });
    if (log[0].session_id !== input.threadId)
      throw new ValidationError('invalid body: resume: the interrupts belong to another thread', {
        field: 'threadId',
      });
    let after = 0;
    const answers: Answer[] = [];
    entries.forEach((entry, i) => {
      const { requestId } = ids[i];
      const asked = askedEvent(log, requestId);
      if (!asked)
        throw new NotFoundError(`request ${requestId} of task ${taskId} not found`, {
          task_id: taskId,
          request_id: requestId,
        });
      after = Math.max(after, asked.sequence);
      if (answeredIn(log, requestId)) return;
      const where = `resume entry ${entry.interruptId} payload`;
      if (asked.type === 'TASK_AWAITING_CLIENT_TOOL') {
        const body =
          entry.status === 'cancelled' ? null : parseOrThrow(ClientToolResultBody, entry.payload, where);
        answers.push({
          kind: 'client_tool',
          requestId,
          answer:
            body === null
              ? { ok: false, error: CLIENT_TOOL_CANCELLED }
              : 'error' in body
                ? { ok: false, error: body.error }
                : { ok: true, output: body.result },
        });
      } else if (asked.type === 'TASK_AWAITING_PERMISSION')
        answers.push({
          kind: 'permission',
          requestId,
          body:
            entry.status === 'cancelled'
              ? { decision: 'deny' }
              : parseOrThrow(ResolvePermissionBody, entry.payload, where),
        });
      else if (entry.status === 'cancelled') answers.push({ kind: 'cancel' });
      else
        answers.push({
          kind: 'secret',
          requestId,
          secret: parseOrThrow(ProvideSecretBody, entry.payload, where).secret,
        });
    });
    for (const a of answers) {
      if (a.kind === 'permission')
        await this.runtime.resolvePermission(taskId, a.requestId, a.body.decision, a.body.content);
      else if (a.kind === 'secret') await this.runtime.provideSecret(taskId, a.requestId, a.secret);
      else if (a.kind === 'client_tool')
        await this.runtime.provideClientToolResult(taskId, a.requestId, a.answer);
    }
    // a secret the person would not give: the run cannot go on, so the task is cancelled
    if (answers.some((a) => a.kind === 'cancel'))
      await this.runtime.cancel(taskId).catch((err: unknown) => {
        if (!(err instanceof IllegalStateError)) throw err;
      });
    return { threadId: input.threadId, runId: input.runId, taskId, after };
  }
}

const askedEvent = (log: readonly RuntimeEvent[], requestId: string) =>
  log.find(
    (
      e,
    ): e is RuntimeEvent<'TASK_AWAITING_PERMISSION' | 'TASK_AWAITING_SECRET' | 'TASK_AWAITING_CLIENT_TOOL'> =>
      (e.type === 'TASK_AWAITING_PERMISSION' ||
        e.type === 'TASK_AWAITING_SECRET' ||
        e.type === 'TASK_AWAITING_CLIENT_TOOL') &&
      e.payload.request_id === requestId,
  );

const answeredIn = (log: readonly RuntimeEvent[], requestId: string): boolean =>
  log.some(
    (e) =>
      (e.type === 'PERMISSION_RESOLVED' ||
        e.type === 'SECRET_PROVIDED' ||
        e.type === 'TOOL_COMPLETED' ||
        e.type === 'TOOL_FAILED') &&
      e.payload.request_id === requestId,
  );
