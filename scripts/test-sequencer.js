'use strict';
/*
 * The order jest hands test files to its workers. With timings of an earlier run in jest's cache,
 * jest's own order (failed first, then slowest first). Without (CI's clean clone), end-to-end files
 * first, then integration, then unit, each largest first: the slow files start early and the two
 * workers end together on small ones, instead of one worker running a 30 s file while the other waits.
 */
const Sequencer = require('@jest/test-sequencer').default;

const tier = (test) => (test.path.endsWith('.e2e-spec.ts') ? 0 : test.path.endsWith('.int.spec.ts') ? 1 : 2);

class SlowFirstSequencer extends Sequencer {
  sort(tests) {
    if (tests.some((test) => this.time(test) != null)) return super.sort(tests);
    const size = (test) => test.context.hasteFS.getSize(test.path) ?? 0;
    return [...tests].sort((a, b) => tier(a) - tier(b) || size(b) - size(a));
  }
}

module.exports = SlowFirstSequencer;
