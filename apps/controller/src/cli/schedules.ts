import { INestApplicationContext } from '@nestjs/common';
import { EventStore } from '@runledger/event-store';
import { RuntimeController, RuntimeLogger, ScheduleView, Scheduler } from '@runledger/runtime';
import type { CliCommand } from './program';
import { CliOutput } from './output';

/** One schedule as `runledger schedules list` shows it: id, state, cron and zone, next slot, latest firing, name or input. */
export function scheduleRow(s: ScheduleView): string {
  const last = s.last_slot ? `${s.last_outcome} ${s.last_slot}` : 'never fired';
  return [
    s.schedule_id,
    (s.paused ? 'paused' : 'active').padEnd(6),
    `${s.cron} (${s.time_zone})`.padEnd(30),
    `next ${s.next_slot ?? '-'}`.padEnd(30),
    last.padEnd(40),
    s.name ?? s.input.split('\n')[0].slice(0, 80),
  ].join('  ');
}

/** A schedule in full, as `runledger schedules get|create|pause|resume` prints it. */
export function scheduleText(s: ScheduleView): string {
  return [
    `schedule ${s.schedule_id}${s.name ? ` (${s.name})` : ''}: ${s.paused ? 'paused' : 'active'}`,
    `  cron       ${s.cron} (${s.time_zone})`,
    `  input      ${s.input.split('\n')[0].slice(0, 200)}`,
    ...(s.session_id ? [`  session    ${s.session_id}`] : []),
    ...(s.budgets ? [`  budgets    ${JSON.stringify(s.budgets)}`] : []),
    `  overlap    ${s.overlap}, catch-up ${s.catch_up}`,
    `  next slot  ${s.next_slot ?? '-'}`,
    `  last slot  ${s.last_slot ? `${s.last_slot} ${s.last_outcome}` : '-'}${s.last_task_id ? ` (task ${s.last_task_id})` : ''}`,
    ...(s.buffered_slot ? [`  buffered   ${s.buffered_slot}`] : []),
    `  tasks      ${s.tasks_started} started`,
  ].join('\n');
}

/**
 * `runledger schedules ...`: the schedules of the log, read and changed as the server's /schedules does
 * (the same events in system:schedules). Slots fire only in a running server.
 */
export async function runSchedules(
  app: INestApplicationContext,
  io: CliOutput,
  cmd: Extract<CliCommand, { kind: 'schedules' }>,
): Promise<number> {
  const scheduler = new Scheduler(app.get(EventStore), app.get(RuntimeController), app.get(RuntimeLogger));
  const show = (s: ScheduleView) => io.answer(cmd.json ? JSON.stringify({ schedule: s }) : scheduleText(s));
  switch (cmd.action) {
    case 'list': {
      const all = await scheduler.list();
      if (cmd.json) io.answer(JSON.stringify({ schedules: all }));
      else if (all.length === 0) io.progress('no schedules', 'dim');
      else for (const s of all) io.answer(scheduleRow(s));
      return 0;
    }
    case 'create':
      show(await scheduler.create(cmd.spec));
      return 0;
    case 'get':
      show(await scheduler.get(cmd.schedule_id));
      return 0;
    case 'pause':
    case 'resume':
      show(await scheduler.pause(cmd.schedule_id, cmd.action === 'pause'));
      return 0;
    case 'delete':
      await scheduler.delete(cmd.schedule_id);
      if (cmd.json) io.answer(JSON.stringify({ deleted: cmd.schedule_id }));
      else io.progress(`schedule ${cmd.schedule_id} deleted (its tasks stay)`);
      return 0;
  }
}
