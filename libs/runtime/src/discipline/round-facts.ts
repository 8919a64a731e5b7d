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

/** Tool calls in log order, each attached to the round whose ROUTER_DECIDED came before it. */
export function toolFacts(events: readonly RuntimeEvent[]): ToolFact[] {
  const facts: ToolFact[] = [];
  const byCall = new Map<string, ToolFact>();
  let round: number | null = null;
  for (const e of events) {
    switch (e.type) {
      case 'ROUTER_DECIDED':
        round = e.payload.round;
        break;
      case 'TOOL_CALLED': {
        // A retried call reuses its call_id; the latest attempt is the fact.
        const fact: ToolFact = {
          call_id: e.payload.call_id,
          tool: e.payload.tool,
          args: e.payload.args,
          args_hash: e.payload.args_hash,
          round,
          ok: null,
          output: null,
          error: null,
        };
        const prev = byCall.get(fact.call_id);
        if (prev) facts.splice(facts.indexOf(prev), 1);
        byCall.set(fact.call_id, fact);
        facts.push(fact);
        break;
      }
      case 'TOOL_COMPLETED': {
        const f = byCall.get(e.payload.call_id);
        if (f)
          Object.assign(f, {
            ok: e.payload.result.ok,
            output: e.payload.result.output,
            error: e.payload.result.error,
          });
        break;
      }
      case 'TOOL_FAILED': {
        const f = byCall.get(e.payload.call_id);
        if (f)
          Object.assign(f, { ok: false, output: e.payload.result?.output ?? null, error: e.payload.error });
        break;
      }
      default:
        break;
    }
  }
  return facts;
}

export function roundsOf(events: readonly RuntimeEvent[]): RoundFacts[] {
  const rounds: RoundFacts[] = [];
  for (const e of events) {
    if (e.type === 'ROUTER_DECIDED')
      rounds.push({ round: e.payload.round, directive: e.payload.directive, tools: [] });
  }
  for (const f of toolFacts(events)) {
    const r = rounds.find((x) => x.round === f.round);
    if (r) r.tools.push(f);
  }
  return rounds;
}

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
