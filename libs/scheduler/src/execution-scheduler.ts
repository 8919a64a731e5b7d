import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, PlanStep, forRootAsyncModule } from '@runledger/contracts';
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
    return forRootAsyncModule(SchedulerModule, options, {
      provide: ExecutionScheduler,
      build: (o) => new ExecutionScheduler(o),
      exports: [ExecutionScheduler],
    });
  }
}
