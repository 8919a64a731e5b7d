#!/usr/bin/env node
/*
 * The npm registry mirror of our build machines serves only the Linux builds of
 * platform-specific optional packages (@swc/core-*, @unrs/resolver-binding-*).
 * `npm install` then writes a lockfile without the other platforms' entries,
 * and `npm ci` refuses it as out of sync. This adds the missing entries,
 * marked optional with their os/cpu, so npm ci skips them on Linux as it would
 * with a lockfile written on a machine that could see every platform.
 * Run after any `npm install` that changes package-lock.json.
 */
const fs = require('node:fs');
const path = require('node:path');

const lockPath = path.join(__dirname, '..', 'package-lock.json');
const lock = JSON.parse(fs.readFileSync(lockPath, 'utf8'));
const packages = lock.packages;

const OS = ['darwin', 'linux', 'win32', 'freebsd', 'android', 'openharmony', 'sunos', 'aix', 'netbsd', 'openbsd', 'wasm32'];
const CPU = ['arm64', 'x64', 'ia32', 'arm', 'ppc64', 's390x', 'riscv64', 'loong64', 'mips64el', 'wasm32'];

function platformOf(name) {
  const parts = name.split('/').pop().split('-');
  const os = parts.find((p) => OS.includes(p));
  const cpu = parts.find((p) => CPU.includes(p) || p === 'arm' || p.startsWith('arm'));
  const cpuNorm = cpu === 'arm' || cpu === 'armv7' ? 'arm' : cpu;
  if (os === 'wasm32' || cpuNorm === 'wasm32') return { cpu: ['wasm32'] };
  const out = {};
  if (os) out.os = [os];
  if (cpuNorm) out.cpu = [cpuNorm];
  return out;
}

let added = 0;
for (const [key, pkg] of Object.entries(packages)) {
  if (!key.startsWith('node_modules/') || !pkg.optionalDependencies) continue;
  const base = key.slice(0, key.lastIndexOf('node_modules/'));
  for (const [dep, version] of Object.entries(pkg.optionalDependencies)) {
    const depKey = `${base}node_modules/${dep}`;
    if (packages[depKey] || packages[`node_modules/${dep}`]) continue;
    const platform = platformOf(dep);
    if (!platform.os && !platform.cpu) continue; // not a platform build: leave it to npm
    packages[depKey] = { version, ...platform, dev: pkg.dev || undefined, optional: true };
    added++;
  }
}
fs.writeFileSync(lockPath, JSON.stringify(lock, null, 2) + '\n');
console.log(`complete-lockfile: added ${added} platform entries`);
