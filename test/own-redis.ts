import { RedisClient } from 'bun'
import { freePort } from './own-postgres'

export interface OwnRedis {
  url: string
  /** Starts it (again) and waits until it answers PING. */
  start(): Promise<void>
  /** Kills it (SIGKILL: nothing is saved, as in a crash). */
  stop(): Promise<void>
}

/** A redis-server of the caller's own on a free loopback port, that it may kill and start again. */
export function ownRedis(): OwnRedis {
  const port = freePort()
  let proc: ReturnType<typeof Bun.spawn> | undefined
  const url = `redis://127.0.0.1:${port}`
  const redis: OwnRedis = {
    url,
    async start() {
      proc = Bun.spawn(
        ['redis-server', '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdout: 'ignore', stderr: 'ignore' },
      )
      const deadline = Date.now() + 10_000
      for (;;) {
        const c = new RedisClient(url, { autoReconnect: false, connectionTimeout: 200 })
        try {
          await c.connect()
          if ((await c.send('PING', [])) === 'PONG') return
        } catch {
          if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not start`)
          await Bun.sleep(20)
        } finally {
          c.close()
        }
      }
    },
    async stop() {
      proc?.kill(9)
      await proc?.exited
    },
  }
  process.once('exit', () => proc?.kill(9))
  return redis
}
