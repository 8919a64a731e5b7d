/** The repository's jest config, with every database a test removes kept for the golden-log recorder. */
const { join } = require('node:path');
const config = require('../../jest.config.js');

const keep = join(__dirname, 'keep-databases.js');
module.exports = {
  ...config,
  rootDir: join(__dirname, '..', '..'),
  projects: config.projects.map((p) => ({ ...p, setupFiles: [...(p.setupFiles ?? []), keep] })),
};
