/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
import { Browser, Page } from 'playwright-core';
import { ApiHarness, TOKENS, bootApi, launchChromium, waitForTask } from './api-harness';

/**
 * The dashboard at a wide and a narrow window (headless Chromium): the task table fits the window,
 * nothing of it is cut off or reachable only by scrolling the page sideways, and the event log says
 * which clock its times come from.
 */

jest.setTimeout(90_000);

describe('dashboard layout (headless Chromium)', () => {
  let sut: ApiHarness;
  let browser: Browser;

  beforeAll(async () => {
    sut = await bootApi({}, { checkResponses: true });
    browser = await launchChromium();
    // long inputs and session ids, as real ones are
    for (const [i, session] of ['a', 'b'].entries()) {
      const res = await sut.request('POST', '/tasks', {
        body: {
          input: `run echo ${'a long command line that goes on and on '.repeat(4)}${i}`,
          session_id: `customer-support-conversation-${session.repeat(40)}`,
        },
      });
      await waitForTask(sut, res.body.task_id);
    }
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await sut?.close();
  });

  /** What sticks out of the window: the page's own sideways overflow, and cells whose right edge is past it. */
  const overflow = (page: Page) =>
    page.evaluate(() => {
      const width = document.documentElement.clientWidth;
      const cells = [...document.querySelectorAll<HTMLElement>('#view-tasks th, #tasks-body td')].filter(
        (c) => c.offsetParent !== null,
      );
      return {
        page: document.documentElement.scrollWidth - width,
        cellsPastTheWindow: cells.filter((c) => c.getBoundingClientRect().right > width + 0.5).length,
        columns: [...document.querySelectorAll<HTMLElement>('#view-tasks th')]
          .filter((c) => c.offsetParent !== null)
          .map((c) => c.textContent),
        // a cell whose text is cut by its width tells the whole of it on hover
        cutWithoutTitle: cells.filter((c) => c.scrollWidth > c.clientWidth && !c.title).length,
      };
    });

  it.each([
    [1400, ['Task', 'Status', 'Stop reason', 'Age', 'Duration', 'Tokens', 'Cost', 'Session']],
    [700, ['Task', 'Status', 'Stop reason', 'Age']],
  ])('at %i px wide the task table fits the window', async (width, columns) => {
    const page = await browser.newPage({ viewport: { width, height: 900 } });
    sut.watch(page);
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.waitForSelector('#tasks-body tr[data-task]');
    expect(await overflow(page)).toEqual({ page: 0, cellsPastTheWindow: 0, columns, cutWithoutTitle: 0 });
    await page.close();
  });

  it('the event log says its times are commit times on the writing instance’s clock, ordered by position', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    sut.watch(page);
    await page.goto(`${sut.url}/admin#token=${encodeURIComponent(TOKENS.admin)}`);
    await page.click('#nav-events');
    await page.waitForSelector('#ev-rows .evrow');
    const head = await page.textContent('#ev-head');
    expect(head).toMatch(/^#position\s+committed \(UTC, writer's clock\)\s+type\s+task:seq/);
    expect(await page.getAttribute('#ev-head', 'title')).toMatch(
      /listed in position order.*that instance's own clock/,
    );
    await page.close();
  });

  it("answered every request above, its own and the dashboard's, as the OpenAPI document describes it", async () => {
    expect(await sut.checkedMismatches()).toEqual([]);
  });
});
