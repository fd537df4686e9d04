import { Elysia } from 'elysia'
import { definePlugin } from '../../core/plugin'
export default definePlugin({ name: 'games', setup: () => new Elysia({ name: 'games' }) })
