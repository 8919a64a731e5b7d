import { Controller, HttpCode, Inject, Param, Post } from '@nestjs/common';
import { ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { MemoryService } from '@runledger/memory';
import { Erasure } from '@runledger/state-store';
import { RequireScope } from '../auth/scopes';
import { ApiErrors, ApiIdParam } from '../docs/api-docs';
import { TreeErasureResponseDto } from '../dtos/erasure.dto';
import { IdParam, ZodPipe } from '../dtos/zod.pipe';
import { TreeErasureResult, eraseTaskTree } from '../sessions/erase-session';

@ApiTags('tasks')
@Controller('tasks')
export class TaskErasureController {
  constructor(
    @Inject(Erasure) private readonly erasure: Erasure,
    @Inject(MemoryService) private readonly memory: MemoryService | null,
  ) {}

  @Post(':task_id/erase')
  @HttpCode(200)
  @RequireScope('admin')
  @ApiOperation({
    operationId: 'eraseTaskTree',
    summary: "Forget one task tree's content: the data keys of its streams are destroyed (crypto-shredding)",
    description:
      "Erases the tree the task belongs to: its root and every delegated child (a child names its root's tree), " +
      'with their outbound deliveries. Their events keep ids, statuses and usage; their personal fields read as ' +
      '"[erased]" everywhere from now on, with `$erased` in the payload. Task rows are refolded, checkpoints deleted, ' +
      "memory entries written for the tree's tasks forgotten, TASK_TREE_ERASED recorded once in `system:erasure`. " +
      "The session's other trees read as before and the session takes new tasks; the tree takes no more events, " +
      'and replay and fork refuse it. Refused (409) while a task of the tree is not finished. See docs/retention.md#erasure.',
  })
  @ApiIdParam('task_id', 'any task of the tree, as returned by POST /tasks')
  @ApiResponse({ status: 200, description: 'what was erased', type: TreeErasureResponseDto.Output })
  @ApiErrors({
    400: 'invalid task_id (or a system stream)',
    403: 'the token lacks the admin scope',
    404: 'no such task',
    409: 'a task of the tree is not finished',
  })
  erase(@Param('task_id', new ZodPipe(IdParam, 'task_id')) taskId: string): Promise<TreeErasureResult> {
    return eraseTaskTree(this.erasure, this.memory, taskId);
  }
}
