import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, PlanStep } from '@runledger/contracts';
import { StepStatus, blockedSteps, findCycle, readySteps } from './graph';
import { PlanParse, parsePlan } from './plan';

export interface SchedulerOptions {
  /** plan steps of one task run at once (RUNLEDGER_STEP_CONCURRENCY) */
  stepConcurrency: number;
}

/** Plan JSON -> PlanStep[], the dependency graph's cycle check, and which steps may run now; over the pure functions of this lib. */
export class ExecutionScheduler {
  constructor(readonly options: SchedulerOptions) {}

  parse(input: unknown): PlanParse {
    return parsePlan(input);
  }

  /** the ids of a dependency cycle, or null when the plan is a DAG */
  cycle(steps: readonly PlanStep[]): string[] | null {
    return findCycle(steps);
  }

  ready(steps: readonly PlanStep[], status: ReadonlyMap<string, StepStatus>): PlanStep[] {
    return readySteps(steps, status, this.options.stepConcurrency);
  }

  blocked(steps: readonly PlanStep[], status: ReadonlyMap<string, StepStatus>): PlanStep[] {
    return blockedSteps(steps, status);
  }
}

@Module({})
export class SchedulerModule {
  static forRootAsync(options: ModuleAsyncOptions<SchedulerOptions>): DynamicModule {
    return {
      module: SchedulerModule,
      global: true,
      imports: options.imports ?? [],
      providers: [
        {
          provide: ExecutionScheduler,
          useFactory: async (...args: unknown[]) => new ExecutionScheduler(await options.useFactory(...args)),
          inject: options.inject ?? [],
        },
      ],
      exports: [ExecutionScheduler],
    };
  }
}
