import { ExecutionDirective, RuntimeEvent } from '@runledger/contracts';

/** One tool call as the log recorded it: intent and, when there is one, outcome. */
export interface ToolFact {
  call_id: string;
  tool: string;
  args: Record<string, unknown>;
  args_hash: string;
  round: number | null;
  /** null: intent recorded, no outcome (yet) */
  ok: boolean | null;
  output: unknown;
  error: string | null;
}

export interface RoundFacts {
  round: number;
  directive: ExecutionDirective;
  tools: ToolFact[];
}

/**
 * Tool facts and rounds, kept event by event: each tool call attached to the
 * round whose ROUTER_DECIDED came before it. O(1) per event; the fold owns
 * the facts and updates them in place as outcomes arrive.
 */
export class RoundFactsFold {
  /** by call id, in log order of each call's latest intent */
  private readonly byCall = new Map<string, ToolFact>();
  private readonly roundList: RoundFacts[] = [];
  /** the first round recorded under each number */
  private readonly byRound = new Map<number, RoundFacts>();
  private round: number | null = null;

  apply(e: RuntimeEvent): void {
    switch (e.type) {
      case 'ROUTER_DECIDED': {
        this.round = e.payload.round;
        const r: RoundFacts = { round: e.payload.round, directive: e.payload.directive, tools: [] };
        this.roundList.push(r);
        if (!this.byRound.has(r.round)) this.byRound.set(r.round, r);
        break;
      }
      case 'TOOL_CALLED': {
        // A retried call reuses its call_id; the latest attempt is the fact, last in log order.
        const prev = this.byCall.get(e.payload.call_id);
        if (prev) {
          this.byCall.delete(prev.call_id);
          const tools = prev.round === null ? undefined : this.byRound.get(prev.round)?.tools;
          if (tools) tools.splice(tools.indexOf(prev), 1);
        }
        const fact: ToolFact = {
          call_id: e.payload.call_id,
          tool: e.payload.tool,
          args: e.payload.args,
          args_hash: e.payload.args_hash,
          round: this.round,
          ok: null,
          output: null,
          error: null,
        };
        this.byCall.set(fact.call_id, fact);
        if (this.round !== null) this.byRound.get(this.round)?.tools.push(fact);
        break;
      }
      case 'TOOL_COMPLETED': {
        const f = this.byCall.get(e.payload.call_id);
        if (f)
          Object.assign(f, {
            ok: e.payload.result.ok,
            output: e.payload.result.output,
            error: e.payload.result.error,
          });
        break;
      }
      case 'TOOL_FAILED': {
        const f = this.byCall.get(e.payload.call_id);
        if (f)
          Object.assign(f, { ok: false, output: e.payload.result?.output ?? null, error: e.payload.error });
        break;
      }
      default:
        break;
    }
  }

  /** Tool calls in log order (a retried call where its latest attempt stands). */
  facts(): ToolFact[] {
    return [...this.byCall.values()];
  }

  /** Rounds in log order; read-only, it is the fold's own list. */
  get rounds(): readonly RoundFacts[] {
    return this.roundList;
  }

  static of(events: readonly RuntimeEvent[]): RoundFactsFold {
    const fold = new RoundFactsFold();
    for (const e of events) fold.apply(e);
    return fold;
  }
}

/** Tool calls in log order, each attached to the round whose ROUTER_DECIDED came before it. */
export const toolFacts = (events: readonly RuntimeEvent[]): ToolFact[] => RoundFactsFold.of(events).facts();

export const roundsOf = (events: readonly RuntimeEvent[]): RoundFacts[] => [
  ...RoundFactsFold.of(events).rounds,
];

/** The answer the task gives: the last respond directive's content. */
export function finalAnswer(events: readonly RuntimeEvent[]): string | null {
  let answer: string | null = null;
  for (const e of events) {
    if (e.type === 'ROUTER_DECIDED' && e.payload.directive.type === 'respond')
      answer = e.payload.directive.content;
    if (e.type === 'TASK_COMPLETED') answer = e.payload.result;
  }
  return answer;
}
