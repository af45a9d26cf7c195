/**
 * The commands an operator looks around with: accounts, keys, credits and
 * usage, each `--json` printing exactly what the API answers for that resource
 * (built by the same functions), else a table built from that same object.
 */
import { systemClock } from '../clock.js';
import { apiKeyList, revokedKeyObject } from '../keys/issue.js';
import { ACCOUNTS_PAGE, accountCredits, accountsPage, accountWithCredits } from '../metering/credits.js';
import { accountUsage, usagePeriod } from '../metering/usage.js';
import {
  CliError, existingAccount, flag, integer, NotFoundError, print, required, str, withStore, type CommandSpec, type OptionSpec, type Values,
} from './support.js';
import { accountsText, accountText, creditsText, keysText, usageText } from './views.js';

const ACCOUNT_OPTION: OptionSpec = ['--account <id>', 'the account', true];

export const inspectCommands: CommandSpec[] = [
  {
    name: 'accounts list',
    summary: 'list accounts in id order, with their balances (as GET /admin/v1/accounts)',
    options: [
      ['--limit <n>', `accounts per page, 1 to ${ACCOUNTS_PAGE.max} (default ${ACCOUNTS_PAGE.default})`],
      ['--after <id>', 'start after this account id (the last of the previous page)'],
    ],
    run: (v, io) => {
      const limit = pageLimit(v);
      return withStore(v, io, async (store) => {
        const page = await accountsPage(store, { limit, after: str(v.after) ?? null }, systemClock.now());
        return print(v, io, page, accountsText(page));
      });
    },
  },
  {
    name: 'accounts show',
    summary: 'one account with its credits (as GET /admin/v1/accounts/{id})',
    options: [ACCOUNT_OPTION],
    run: (v, io) => withStore(v, io, async (store) => {
      const account = await existingAccount(store, required(v, 'account'));
      const shown = await accountWithCredits(store, account, systemClock.now());
      return print(v, io, shown, accountText(shown));
    }),
  },
  {
    name: 'keys list',
    summary: "an account's active API keys, never their secrets (as GET /v1/api-keys)",
    options: [ACCOUNT_OPTION],
    run: (v, io) => withStore(v, io, async (store) => {
      const account = await existingAccount(store, required(v, 'account'));
      const list = apiKeyList(await store.listApiKeys(account.id));
      return print(v, io, list, keysText(list));
    }),
  },
  {
    name: 'keys revoke',
    summary: 'revoke an API key: the gateway refuses it from then on (as DELETE /v1/api-keys/{id})',
    options: [ACCOUNT_OPTION, ['--key <key_id>', "the key's id, key_…", true]],
    run: (v, io) => withStore(v, io, async (store) => {
      const accountId = required(v, 'account');
      const keyId = required(v, 'key');
      await existingAccount(store, accountId);
      if (!(await store.revokeApiKey(accountId, keyId))) throw new NotFoundError(`no active key ${keyId} on account ${accountId}`);
      return print(v, io, revokedKeyObject(keyId), `revoked ${keyId} of ${accountId}\n`);
    }),
  },
  {
    name: 'credits show',
    summary: "an account's credits: earned with its expiry, purchased, reserved, available (as GET /v1/credits)",
    options: [ACCOUNT_OPTION],
    run: (v, io) => withStore(v, io, async (store) => {
      const account = await existingAccount(store, required(v, 'account'));
      const credits = await accountCredits(store, account.id, systemClock.now());
      return print(v, io, credits, creditsText(credits));
    }),
  },
  {
    name: 'usage',
    summary: "an account's settled requests by UTC day and model (as GET /v1/usage)",
    options: [
      ACCOUNT_OPTION,
      ['--start-date <date>', 'first day, YYYY-MM-DD (default: 29 days before the end date)'],
      ['--end-date <date>', 'last day, YYYY-MM-DD (default: today, UTC)'],
      ['--model <alias>', 'only this model alias'],
    ],
    run: (v, io) => {
      const accountId = required(v, 'account');
      const period = usagePeriod({ start_date: v.startDate, end_date: v.endDate }, systemClock.now());
      if (!period.ok) throw new CliError(`${flag(period.param)}: ${period.message}`);
      return withStore(v, io, async (store) => {
        await existingAccount(store, accountId);
        const usage = await accountUsage(store, accountId, period, str(v.model));
        return print(v, io, usage, usageText(usage, accountId));
      });
    },
  },
];

function pageLimit(v: Values): number {
  const text = str(v.limit);
  if (text === undefined) return ACCOUNTS_PAGE.default;
  const limit = integer(text, '--limit');
  if (limit < 1 || limit > ACCOUNTS_PAGE.max) throw new CliError(`--limit must be from 1 to ${ACCOUNTS_PAGE.max}, got ${limit}`);
  return limit;
}
