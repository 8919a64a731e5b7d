import { StartedApp } from './app';

/**
 * What the server tells the person who started it, for stderr (stdout carries only JSON log lines).
 * The dashboard address carries the token only when the server generated it: a configured token is
 * the operator's own, and printing it would copy it into terminal scrollback and log collectors.
 * The token rides in the fragment, which the browser never sends to the server (as Jupyter does).
 */
export function startupBanner(started: Pick<StartedApp, 'url' | 'generatedAdminToken'>): string {
  const lines = [`runledger listening on ${started.url}`];
  const generated = started.generatedAdminToken;
  if (generated) {
    lines.push(
      `${generated.created ? 'generated' : 'using'} admin token in ${generated.file}`,
      `dashboard: ${started.url}/admin#token=${encodeURIComponent(generated.token)}`,
    );
  } else {
    lines.push(`dashboard: ${started.url}/admin (sign in with a configured token)`);
  }
  return `${lines.join('\n')}\n`;
}
