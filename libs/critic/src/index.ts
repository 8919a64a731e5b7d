export * from './critic';
export * from './heuristic-critic';
export * from './model-critic';
export * from './critic.module';
export * from './answer-evaluator';
