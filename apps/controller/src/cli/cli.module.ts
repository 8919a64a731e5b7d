import { DynamicModule, Module } from '@nestjs/common';
import { CompositionModule, CompositionOptions } from '../composition.module';

/** The CLI's application context: the same composition as the server, no HTTP. */
@Module({})
export class CliModule {
  static forRoot(options: CompositionOptions): DynamicModule {
    return { module: CliModule, imports: [CompositionModule.forRoot(options)] };
  }
}
