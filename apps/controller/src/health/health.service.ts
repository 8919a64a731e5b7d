import { Inject, Injectable } from '@nestjs/common';
import Database from 'better-sqlite3';
import { DATABASE } from '../tokens';

@Injectable()
export class HealthService {
  constructor(@Inject(DATABASE) private readonly db: Database.Database) {}

  check() {
    this.db.prepare('select 1').get();
    return { status: 'ok', db: 'reachable' };
  }
}
