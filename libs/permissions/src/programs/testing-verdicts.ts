import { PermissionVerdict } from '@runledger/contracts';
import { RulePermissionPolicy } from '../rule-permission-policy';

/** A command line, the verdict the rule table gives it over /srv/ws, and the rule that decided (null: none). */
export type VerdictCase = [command: string, verdict: PermissionVerdict, rule: string | null];

/** One program spec's test: each of its allowed and refused command lines, checked against the rule table. */
export function describeVerdicts(title: string, cases: VerdictCase[]): void {
  const sut = new RulePermissionPolicy({ allowedRoot: '/srv/ws' });
  describe(title, () => {
    it.each(cases)('%j is %s', (command, verdict, rule) => {
      expect(sut.checkShellCommand(command)).toMatchObject({ verdict, rule });
    });
  });
}
