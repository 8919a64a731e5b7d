/** `npm run docs:config`: writes docs/configuration.md from the config schema and its descriptions. */
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { renderConfigReference } from './config-reference';

export const CONFIG_REFERENCE_FILE = resolve(__dirname, '../../../../docs/configuration.md');

if (require.main === module) {
  writeFileSync(CONFIG_REFERENCE_FILE, renderConfigReference());
  process.stdout.write(`wrote ${CONFIG_REFERENCE_FILE}\n`);
}
