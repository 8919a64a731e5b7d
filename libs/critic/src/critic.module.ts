import { DynamicModule, Module } from '@nestjs/common';
import { ModuleAsyncOptions, forRootAsyncModule } from '@runledger/contracts';
import { Critic } from './critic';
import { HeuristicCritic } from './heuristic-critic';
import { CriticModel, ModelCritic } from './model-critic';

/** off: nothing scores; heuristic: rules, no model; model: the critic role of a model, within timeoutMs. */
export type CriticOptions =
  { mode: 'off' } | { mode: 'heuristic' } | { mode: 'model'; model: CriticModel; timeoutMs?: number };

export function criticFrom(options: CriticOptions): Critic | null {
  switch (options.mode) {
    case 'off':
      return null;
    case 'heuristic':
      return new HeuristicCritic();
    case 'model':
      return new ModelCritic(options.model, options.timeoutMs);
  }
}

/** Critic under its class token; the provider is null when the critic is off (inject it @Optional). */
@Module({})
export class CriticModule {
  static forRootAsync(options: ModuleAsyncOptions<CriticOptions>): DynamicModule {
    return forRootAsyncModule(CriticModule, options, {
      provide: Critic,
      build: criticFrom,
      exports: [Critic],
    });
  }
}
