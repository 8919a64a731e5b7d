import { canonicalJson, sha256 } from '@runledger/contracts';
import { RoundFacts, ToolFact } from './round-facts';
import { SeenSet } from './seen-set';

/**
 * Repeat-cycle detector. A round counts when its tool signatures (name +
 * canonical args), result fingerprint and sub-goal fingerprint all equal an
 * earlier round's. Rounds that only read, search, list or test are never
 * counted (doing them again is how a model checks progress); a write with
 * different content has a different signature, so it never matches.
 */
export interface RoundFingerprint {
  round: number;
  tools: string;
  results: string;
  subgoal: string;
  /** false: only reading/searching/testing tools; the round neither counts nor breaks a streak */
  counted: boolean;
}

const READ_ONLY_TOOL = /(^|_)(read|list|search|grep|glob|find|stat|recall|get|fetch|query|ls|cat|view)(_|$)/;
/** Shell commands that inspect or test rather than change anything. */
const READ_ONLY_COMMAND =
  /^\s*(cat|ls|head|tail|wc|grep|rg|find|stat|pwd|echo|diff|tree|file|du|df|which|git\s+(status|diff|log|show)|(npm|pnpm|yarn)\s+(run\s+)?test|npx\s+(jest|vitest|mocha)|jest|vitest|pytest|python3?\s+-m\s+(pytest|unittest)|go\s+(test|vet)|cargo\s+(test|check)|make\s+(test|check)|tsc\b.*--noEmit)\b/;

export function isReadOnlyCall(f: Pick<ToolFact, 'tool' | 'args'>): boolean {
  if (READ_ONLY_TOOL.test(f.tool)) return true;
  const cmd =
    typeof f.args.command === 'string' ? f.args.command : typeof f.args.cmd === 'string' ? f.args.cmd : null;
  return cmd !== null && READ_ONLY_COMMAND.test(cmd) && !/[;&|>]/.test(cmd);
}

export const toolSignature = (f: Pick<ToolFact, 'tool' | 'args'>): string =>
  `${f.tool}:${canonicalJson(f.args)}`;

/** null for a round that called no tool (a plain answer, a reminder round): the detector ignores it. */
export function fingerprintRound(r: RoundFacts): RoundFingerprint | null {
  if (r.tools.length === 0) return null;
  const sigs = r.tools.map(toolSignature).sort();
  const results = r.tools
    .map((f) => `${toolSignature(f)}=>${f.ok}:${canonicalJson(f.output ?? null)}:${f.error ?? ''}`)
    .sort();
  const d = r.directive;
  const subgoal =
    d.type === 'plan'
      ? d.steps
          .map((s) => `${s.kind}:${s.description}`)
          .sort()
          .join('\n')
      : d.type;
  return {
    round: r.round,
    tools: sha256(sigs.join('\n')),
    results: sha256(results.join('\n')),
    subgoal: sha256(subgoal),
    counted: !r.tools.every(isReadOnlyCall),
  };
}

export interface RepeatState {
  seen: SeenSet<string>;
  streak: number;
  reminded: boolean;
}
export const initialRepeatState = (): RepeatState => ({
  seen: SeenSet.empty(),
  streak: 0,
  reminded: false,
});

export type RepeatVerdict =
  | { action: 'continue'; state: RepeatState }
  | { action: 'remind'; state: RepeatState; detail: string }
  | { action: 'stop'; state: RepeatState; detail: string };

export const REPEAT_REMINDER =
  'You are repeating an earlier step with the same arguments and getting the same result. ' +
  'Change approach, or finish with {"type":"respond",...} or {"type":"fail",...}.';

/**
 * One round into the streak: `threshold` repeats in a row earn a reminder; a
 * further repeat right after it stops the task with repeat_cycle. A new round
 * ends the streak and forgets the reminder.
 */
export function repeatStep(
  state: RepeatState,
  fp: RoundFingerprint | null,
  threshold: number,
): RepeatVerdict {
  if (fp === null || !fp.counted) return { action: 'continue', state };
  const key = `${fp.tools}|${fp.results}|${fp.subgoal}`;
  if (!state.seen.has(key))
    return { action: 'continue', state: { seen: state.seen.with(key), streak: 0, reminded: false } };
  const streak = state.streak + 1;
  if (state.reminded) {
    return {
      action: 'stop',
      state: { ...state, streak },
      detail: `round ${fp.round} repeated an earlier round again after a reminder (${streak} repeats in a row)`,
    };
  }
  if (streak >= threshold) {
    return {
      action: 'remind',
      state: { ...state, streak, reminded: true },
      detail: `round ${fp.round} is the ${streak}th repeat of an earlier round in a row; reminded`,
    };
  }
  return { action: 'continue', state: { ...state, streak } };
}

/** Replay the detector over recorded rounds, e.g. after a restart. */
export function repeatFold(rounds: readonly RoundFacts[], threshold: number): RepeatVerdict {
  let verdict: RepeatVerdict = { action: 'continue', state: initialRepeatState() };
  for (const r of rounds) verdict = repeatStep(verdict.state, fingerprintRound(r), threshold);
  return verdict;
}
