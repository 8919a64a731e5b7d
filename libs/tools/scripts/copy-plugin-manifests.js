#!/usr/bin/env node
// tsc compiles the built-in plugins' index.ts but does not copy their manifest.json: do it here.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..', '..', '..');
const from = path.join(root, 'libs', 'tools', 'plugins');
const to = path.join(root, 'dist', 'libs', 'tools', 'plugins');
let copied = 0;
for (const name of fs.readdirSync(from)) {
  const manifest = path.join(from, name, 'manifest.json');
  if (!fs.existsSync(manifest)) continue;
  fs.mkdirSync(path.join(to, name), { recursive: true });
  fs.copyFileSync(manifest, path.join(to, name, 'manifest.json'));
  copied++;
}
console.log(`copied ${copied} plugin manifests to ${path.relative(root, to)}`);

// The admin dashboard's static files (apps/controller/src/admin/static) are served from beside the compiled controller.
const dashboardFrom = path.join(root, 'apps', 'controller', 'src', 'admin', 'static');
const dashboardTo = path.join(root, 'dist', 'apps', 'controller', 'src', 'admin', 'static');
if (fs.existsSync(dashboardFrom)) {
  fs.cpSync(dashboardFrom, dashboardTo, { recursive: true });
  console.log(`copied the admin dashboard to ${path.relative(root, dashboardTo)}`);
}
