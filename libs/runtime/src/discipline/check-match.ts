import { AcceptCheck } from '@runledger/contracts';

/** The longest matched text an ACCEPTANCE_DECIDED records as the excerpt of a workspace file. */
export const EXCERPT_MAX_CHARS = 200;

/** Where a check's match occurs in `text` (a literal, or a regex with params.regex), null when it does not. */
export function findMatch(text: string, check: AcceptCheck): { index: number; text: string } | null {
  if (check.match === null) return { index: 0, text: '' };
  if (check.params.regex === true) {
    let re: RegExp;
    try {
      re = new RegExp(check.match, 'm');
    } catch {
      return null;
    }
    const m = re.exec(text);
    return m ? { index: m.index, text: m[0] } : null;
  }
  const index = text.indexOf(check.match);
  return index === -1 ? null : { index, text: check.match };
}

export const matches = (text: string, check: AcceptCheck): boolean => findMatch(text, check) !== null;
