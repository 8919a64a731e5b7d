import { PlanStep } from '@runledger/contracts';

/** A tool step `id` that waits for `depends_on`, with the defaults parsePlan applies; for the scheduler's specs. */
export const planStep = (id: string, depends_on: string[] = []): PlanStep => ({
  id,
  kind: 'tool',
  tool: 'echo',
  args: {},
  description: '',
  requires_confirmation: false,
  depends_on,
});
