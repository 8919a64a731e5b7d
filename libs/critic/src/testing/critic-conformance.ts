import { CriticScore } from '@runledger/contracts';
import { Critic, CriticInput } from '../critic';

const completed: CriticInput = {
  target_event_id: 'evt_1',
  call_id: 'call_1',
  tool: 'file_read',
  ok: true,
  output: { content: 'hello' },
  error: null,
  metadata: {},
};
const failed: CriticInput = {
  ...completed,
  call_id: 'call_2',
  ok: false,
  output: null,
  error: 'ENOENT: no such file',
};

/**
 * What every Critic promises the runtime: it never throws; a verdict names the critic's kind and
 * carries either a valid CriticScore or an error with no score (never a guessed one); a model
 * critic's verdict records the exchange that produced it, so a replay can answer it again.
 */
export function runCriticConformance(name: string, make: () => Critic): void {
  describe(`Critic conformance: ${name}`, () => {
    it.each([
      ['a completed tool outcome', completed],
      ['a failed tool outcome', failed],
    ])('judges %s with a valid score or an error, never both, never a throw', async (_, input) => {
      const sut = make();
      const verdict = await sut.evaluate(input);
      expect(verdict.critic).toBe(sut.kind);
      if (verdict.score === null) expect(verdict.error).toMatch(/\S/);
      else {
        expect(CriticScore.safeParse(verdict.score).success).toBe(true);
        expect(verdict.error).toBeNull();
      }
      if (sut.kind === 'model') expect(verdict.exchange).toMatchObject({ call_id: expect.any(String) });
      else expect(verdict.exchange).toBeNull();
    });

    it('answers an aborted evaluation with a verdict, not a throw', async () => {
      const sut = make();
      const ctrl = new AbortController();
      ctrl.abort(new Error('stopped'));
      const verdict = await sut.evaluate(completed, ctrl.signal);
      expect(verdict.critic).toBe(sut.kind);
      expect(verdict.score === null ? verdict.error : verdict.score).toBeTruthy();
    });
  });
}
