#!/usr/bin/env node
'use strict';
// Runs before `npm test`. The tests need bubblewrap (the OS sandbox the shell tools run in) and
// Chromium (the dashboard tests drive it). On a fresh machine they are installed with apt-get when
// that can work (root, apt-get on PATH), as .ci/run does; otherwise this stops with one line naming
// what to install, before ~2,300 tests fail one by one for the same reason.
const { accessSync, constants, existsSync, readdirSync } = require('node:fs');
const { delimiter, join } = require('node:path');
const { spawnSync } = require('node:child_process');

const DEFAULT_CHROMIUM = '/usr/bin/chromium';

function onPath(name, env) {
  return (env.PATH || '')
    .split(delimiter)
    .filter(Boolean)
    .some((dir) => {
      try {
        accessSync(join(dir, name), constants.X_OK);
        return true;
      } catch {
        return false;
      }
    });
}

/** The Debian packages the tests need and this machine lacks (the same checks the tests make). */
function missingPackages(env, defaultChromium = DEFAULT_CHROMIUM) {
  const missing = [];
  if (!onPath('bwrap', env)) missing.push('bubblewrap');
  // test/api-harness.ts launches CHROMIUM_PATH, or /usr/bin/chromium (Debian's package)
  if (!env.CHROMIUM_PATH && !existsSync(defaultChromium)) missing.push('chromium');
  return missing;
}

/** No package lists yet (a fresh container): `apt-get install` would find nothing until `apt-get update`. */
function aptListsMissing(dir = '/var/lib/apt/lists') {
  try {
    return !readdirSync(dir).some((name) => name.includes('_Packages'));
  } catch {
    return true;
  }
}

/**
 * Checks, installs what it can, and returns the exit code. Everything it does to the machine goes
 * through `run` (and is printed first), so it can be tested without touching the machine.
 */
function setUp({ env, isRoot, listsMissing, run, log, defaultChromium = DEFAULT_CHROMIUM }) {
  if (env.CHROMIUM_PATH && !existsSync(env.CHROMIUM_PATH)) {
    log(`pretest: CHROMIUM_PATH=${env.CHROMIUM_PATH} does not exist; point it at a Chromium or unset it`);
    return 1;
  }
  const missing = missingPackages(env, defaultChromium);
  if (missing.length === 0) return 0;
  const names = missing.join(' and ');
  const command = `apt-get install -y ${missing.join(' ')}`;
  if (!isRoot || !onPath('apt-get', env)) {
    log(
      `pretest: the tests need ${names}, not installed here; install ${missing.length > 1 ? 'them' : 'it'} (Debian/Ubuntu: sudo ${command}) and run npm test again`,
    );
    return 1;
  }
  log(`pretest: the tests need ${names}; installing with apt-get`);
  const apt = (...args) => {
    log(`pretest: $ apt-get ${args.join(' ')}`);
    return run('apt-get', args, { ...env, DEBIAN_FRONTEND: 'noninteractive' }) === 0;
  };
  let updated = false;
  const update = () => {
    updated = true;
    return apt('update');
  };
  let installed = (!listsMissing || update()) && apt('install', '-y', ...missing);
  // stale package lists name versions the mirror no longer has: refresh them once and try again
  if (!installed && !updated) installed = update() && apt('install', '-y', ...missing);
  const still = missingPackages(env, defaultChromium);
  if (still.length > 0) {
    log(
      `pretest: apt-get did not install ${still.join(' and ')}; install by hand (sudo apt-get install -y ${still.join(' ')}) and run npm test again`,
    );
    return 1;
  }
  return 0;
}

module.exports = { setUp };

if (require.main === module) {
  process.exitCode = setUp({
    env: process.env,
    isRoot: typeof process.getuid === 'function' && process.getuid() === 0,
    listsMissing: aptListsMissing(),
    run: (cmd, args, env) => spawnSync(cmd, args, { stdio: 'inherit', env }).status,
    log: (line) => process.stderr.write(`${line}\n`),
  });
}
