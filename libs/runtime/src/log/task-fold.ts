import { EventPayload, RuntimeEvent } from '@runledger/contracts';
import { TaskState, evolve, foldTaskState } from '@runledger/state-store';
import { MeterState, initialMeterState, meterEvolve } from '../discipline/budgets';
import { CompletionState, completionEvolve, initialCompletionState } from '../discipline/completion';
import { ToolGuardState, initialToolGuardState, toolGuardEvolve } from '../discipline/failure-policy';
import {
  RepeatVerdict,
  fingerprintRound,
  initialRepeatState,
  repeatStep,
} from '../discipline/repeat-detector';
import { RoundFacts, RoundFactsFold } from '../discipline/round-facts';
import { DEFAULT_CHARS_PER_TOKEN } from '../model/usage-estimate';
import { ProviderSwitchesFold } from '../model/providers';
import { TaskProgress, evolveProgress, foldProgress } from './progress';

interface RepeatCursor {
  verdict: RepeatVerdict;
  /** rounds (in log order) already stepped through the detector */
  next: number;
}

/**
 * The task fold: where a task's state is. Everything the runtime derives from one task's log, kept
 * up to date one event at a time:
 * - `progress`, the run's state (progress.ts, with the usage meter): what the loop decides its next
 *   action from; a checkpoint stores it (progress-snapshot.ts), and loadProgress folds it from there;
 * - `state`, the task's public state (state-store's `evolve`: status, pending requests, usage,
 *   result), the same fold the tasks projection, the task views and the protocol adapters run, as of
 *   what the log holds (`committed`); a checkpoint stores it beside the progress;
 * - the tool facts and rounds (accept gate, repeat detector), tool health (circuit breaker,
 *   adaptive timeouts), the completion protocol's misses, provider switches, and which guards
 *   already spoke.
 * The task writer applies every event it appends or reads, so the loop, its guards and the engine's
 * gates read the current state instead of folding the log again; each step costs O(1) however long
 * the task. The per-event `evolve` functions it composes stay pure and are tested alone.
 */
export class TaskFold {
  readonly progress: TaskProgress;
  readonly facts = new RoundFactsFold();
  readonly providers = new ProviderSwitchesFold();
  private readonly events: RuntimeEvent[] = [];
  private toolGuardState: ToolGuardState = initialToolGuardState();
  private completionState: CompletionState = initialCompletionState();
  private decided: EventPayload<'ROUTER_DECIDED'> | null = null;
  /** rounds each guard spoke for (GUARD_TRIGGERED guard -> rounds) */
  private readonly guardedRounds = new Map<string, Set<number | null>>();
  /** tools whose open circuit breaker was announced -> whether the tool failed again since */
  private readonly circuitsTold = new Map<string, boolean>();
  /** meters at a characters-per-token other than the default (the progress carries that one) */
  private readonly meters = new Map<number, { options: { charsPerToken: number }; state: MeterState }>();
  /** the repeat detector, per threshold, over the rounds that closed */
  private readonly repeats = new Map<number, RepeatCursor>();
  /** the public state through the events the log holds, as the store returned them */
  private committedState: TaskState | null;

  /**
   * `events` as the log holds them. `state`: the public state they fold to, when it is known already
   * (a writer's fold started again after another writer's append keeps the state it had).
   */
  constructor(taskId: string, events: readonly RuntimeEvent[] = [], state?: TaskState | null) {
    this.progress = foldProgress(taskId, []);
    for (const e of events) this.apply(e);
    this.committedState = state === undefined ? foldTaskState(events) : state;
  }

  apply(e: RuntimeEvent): void {
    this.events.push(e);
    evolveProgress(this.progress, e);
    this.facts.apply(e);
    this.providers.apply(e);
    this.toolGuardState = toolGuardEvolve(this.toolGuardState, e);
    this.completionState = completionEvolve(this.completionState, e);
    for (const m of this.meters.values()) m.state = meterEvolve(m.state, e, m.options);
    switch (e.type) {
      case 'ROUTER_DECIDED':
        this.decided = e.payload;
        break;
      case 'GUARD_TRIGGERED': {
        const { guard, round, data } = e.payload;
        const rounds = this.guardedRounds.get(guard) ?? new Set();
        this.guardedRounds.set(guard, rounds.add(round));
        if (guard === 'circuit_breaker' && typeof data.tool === 'string' && !this.circuitsTold.has(data.tool))
          this.circuitsTold.set(data.tool, false);
        break;
      }
      case 'TOOL_FAILED':
        if (this.circuitsTold.has(e.payload.tool)) this.circuitsTold.set(e.payload.tool, true);
        break;
      default:
        break;
    }
  }

  /** An event the log now holds, as the store returned it (its time, its redactions): the public state moves on. */
  committed(e: RuntimeEvent): void {
    this.committedState = evolve(this.committedState, e);
  }

  /**
   * The public state after each of `events` (folded, not yet committed) in turn, from the state
   * through what the log holds; nothing changes here (see committedAs).
   */
  stateAhead(events: readonly RuntimeEvent[]): (TaskState | null)[] {
    let state = this.committedState;
    return events.map((e) => (state = evolve(state, e)));
  }

  /** The log now holds the next event, the very one folded into `state` (stateAhead): the public state is `state`. */
  committedAs(state: TaskState | null): void {
    this.committedState = state;
  }

  /** The task's public state through what the log holds (null before its first event). */
  get state(): TaskState | null {
    return this.committedState;
  }

  /** Every event of the task so far, in order. */
  get log(): readonly RuntimeEvent[] {
    return this.events;
  }

  get toolGuard(): ToolGuardState {
    return this.toolGuardState;
  }

  get completion(): CompletionState {
    return this.completionState;
  }

  /** The latest ROUTER_DECIDED, null before the first. */
  get lastDecision(): EventPayload<'ROUTER_DECIDED'> | null {
    return this.decided;
  }

  /** A GUARD_TRIGGERED of `guard` was recorded for `round`. */
  guarded(guard: string, round: number | null): boolean {
    return this.guardedRounds.get(guard)?.has(round) ?? false;
  }

  /** null: the tool's open circuit was never announced; else whether it failed again after that. */
  circuitFailedSinceTold(tool: string): boolean | null {
    return this.circuitsTold.get(tool) ?? null;
  }

  /**
   * The usage meter, estimating unreported tokens at `charsPerToken`. The
   * first ask for a ratio other than the default folds the log once; from then
   * on that meter is kept with every event too.
   */
  meter(charsPerToken: number = DEFAULT_CHARS_PER_TOKEN): MeterState {
    if (charsPerToken === DEFAULT_CHARS_PER_TOKEN) return this.progress.meter;
    let m = this.meters.get(charsPerToken);
    if (!m) {
      const options = { charsPerToken };
      m = { options, state: this.events.reduce((s, e) => meterEvolve(s, e, options), initialMeterState()) };
      this.meters.set(charsPerToken, m);
    }
    return m.state;
  }

  /**
   * The repeat detector's verdict over the rounds before `round`, and the last
   * of them. Asked once per round as rounds go up (they are numbered upwards in
   * the log); rounds already judged are not judged again, since a closed
   * round's facts no longer change.
   */
  repeatBefore(round: number, threshold: number): { verdict: RepeatVerdict; last: RoundFacts | undefined } {
    const rounds = this.facts.rounds;
    let cursor = this.repeats.get(threshold) ?? {
      verdict: { action: 'continue', state: initialRepeatState() },
      next: 0,
    };
    while (cursor.next < rounds.length && rounds[cursor.next].round < round) {
      const r = rounds[cursor.next];
      cursor = {
        verdict: repeatStep(cursor.verdict.state, fingerprintRound(r), threshold),
        next: cursor.next + 1,
      };
    }
    this.repeats.set(threshold, cursor);
    return { verdict: cursor.verdict, last: rounds[cursor.next - 1] };
  }
}
