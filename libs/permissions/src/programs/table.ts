import { AWK } from './awk';
import { FILE_WRITER_SPECS } from './file-writers';
import { FIND } from './find';
import { GIT } from './git';
import { GREP } from './grep';
import { JQ } from './jq';
import { MACHINE_SPECS } from './machine';
import { NETWORK } from './network';
import { ProgramSpec } from './program-spec';
import { PURE_SPECS } from './pure';
import { READER_SPECS } from './readers';
import { SED } from './sed';
import { XARGS } from './xargs';

/** Every program the policy knows; a program found in none is unknown and asks first. */
export const PROGRAM_SPECS: readonly ProgramSpec[] = [
  ...MACHINE_SPECS,
  ...FILE_WRITER_SPECS,
  FIND,
  GIT,
  SED,
  AWK,
  GREP,
  JQ,
  ...READER_SPECS,
  ...PURE_SPECS,
  NETWORK,
  XARGS,
];

const BY_NAME = new Map<string, ProgramSpec>();
for (const spec of PROGRAM_SPECS)
  for (const name of spec.names) {
    // one spec per program: two would make the verdict depend on table order
    if (BY_NAME.has(name)) throw new Error(`two program specs name ${name}`);
    BY_NAME.set(name, spec);
  }

/** The spec that judges `name`, or undefined for a program no spec knows. */
export function programSpec(name: string): ProgramSpec | undefined {
  return BY_NAME.get(name) ?? PROGRAM_SPECS.find((s) => s.namePattern?.test(name));
}
