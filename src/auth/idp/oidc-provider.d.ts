// oidc-provider v9 ships no type declarations (and @types/oidc-provider describes older majors),
// so this declares only the slice of its API the embedded IdP uses.
declare module 'oidc-provider' {
  import type { EventEmitter } from 'node:events';
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export type UnknownObject = Record<string, unknown>;

  export interface AdapterPayload {
    [key: string]: unknown;
    grantId?: string;
    uid?: string;
    userCode?: string;
    consumed?: unknown;
  }

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export interface ClientMetadata {
    client_id: string;
    client_secret?: string;
    client_name?: string;
    application_type?: 'web' | 'native';
    token_endpoint_auth_method?: string;
    grant_types?: string[];
    response_types?: string[];
    redirect_uris?: string[];
    post_logout_redirect_uris?: string[];
    [key: string]: unknown;
  }

  export interface Client {
    readonly clientId: string;
    readonly clientName?: string;
    readonly applicationType: 'web' | 'native';
    readonly redirectUris: string[];
    readonly postLogoutRedirectUris?: string[];
    redirectUriAllowed(value: string): boolean;
    postLogoutRedirectUriAllowed(value: string): boolean;
    grantTypeAllowed(grantType: string): boolean;
  }

  export interface ResourceServerInfo {
    scope: string;
    audience?: string;
    accessTokenTTL?: number;
    accessTokenFormat?: 'opaque' | 'jwt';
    jwt?: { sign?: { alg?: string; kid?: string } };
  }

  export interface BaseToken {
    readonly kind: string;
    readonly jti: string;
    readonly accountId?: string;
    readonly clientId?: string;
    readonly scope?: string;
    readonly scopes: Set<string>;
    readonly resourceServer?: { audience?: string; scope?: string };
    readonly grantId?: string;
    readonly gty?: string;
    readonly jkt?: string;
    readonly claims?: UnknownObject;
    readonly sessionUid?: string;
    readonly expiresWithSession?: boolean;
    readonly sid?: string;
    /** How the user signed in (on codes and refresh tokens): `acr`, `amr` and `auth_time` in seconds. */
    readonly acr?: string;
    readonly amr?: string[];
    readonly authTime?: number;
    /** Seconds the token lives from issue. */
    readonly expiration: number;
  }

  export interface AccessTokenConstructor {
    new (properties: {
      jti?: string;
      accountId: string;
      clientId?: string;
      grantId: string;
      gty?: string;
      scope: string;
      claims?: UnknownObject;
      sessionUid?: string;
      expiresWithSession?: boolean;
      sid?: string;
      expiresIn?: number;
    }): { format?: 'opaque' | 'jwt'; save(): Promise<string> };
  }

  export interface Account {
    accountId: string;
    claims(
      use: string,
      scope: string,
      claims: UnknownObject,
      rejected: string[],
    ): Promise<UnknownObject> | UnknownObject;
  }

  /** The Koa context oidc-provider hands to configuration helpers. */
  export interface KoaContextWithOIDC {
    oidc: {
      readonly provider: Provider;
      /** What the current request has loaded: at the token endpoint, the code or refresh token and its grant. */
      readonly entities?: {
        readonly Grant?: Grant;
        readonly AuthorizationCode?: BaseToken;
        readonly RefreshToken?: BaseToken;
        /** Set by the end_session endpoint once an `id_token_hint` has been verified (signature, issuer, audience). */
        readonly IdTokenHint?: { readonly payload: UnknownObject };
      };
      readonly client?: Client;
      readonly route?: string;
      readonly params?: UnknownObject;
      readonly session?: {
        readonly accountId?: string;
        readonly authorizations?: Readonly<Record<string, unknown>>;
        sidFor(clientId: string): string | undefined;
      };
      /** The current session's `acr` (the authorization endpoint). */
      readonly acr?: string;
      /** The requested claims: `acr_values` arrive here as `id_token.acr.values`, the claims parameter as given. */
      readonly claims?: { id_token?: { acr?: { essential?: boolean; value?: string; values?: string[] } } };
      /** What the interaction just finished with, on the request that resumes the authorization. */
      readonly result?: UnknownObject;
    };
    body: unknown;
    type: string;
    status: number;
    readonly host: string;
    readonly response: { get(field: string): string };
    set(field: string, value: string): void;
  }

  export interface PromptDetails {
    missingOIDCScope?: string[];
    missingOIDCClaims?: string[];
    missingResourceScopes?: Record<string, string[]>;
    [key: string]: unknown;
  }

  export interface InteractionDetails {
    readonly uid: string;
    readonly returnTo: string;
    readonly grantId?: string;
    readonly prompt: { name: string; reasons: string[]; details: PromptDetails };
    readonly params: UnknownObject & { client_id?: string; scope?: string };
    readonly session?: { accountId: string; uid: string; acr?: string; amr?: string[] };
    /** What an interaction stored with `interactionResult` and has not finished with yet. */
    readonly result?: UnknownObject;
  }

  export interface InteractionResults {
    login?: { accountId: string; remember?: boolean; acr?: string; amr?: string[]; ts?: number };
    consent?: { grantId?: string };
    error?: string;
    error_description?: string;
    [key: string]: unknown;
  }

  /** The oidc-provider session behind the `session` cookie, as the documented `Session.get` returns it. */
  export interface Session {
    readonly jti: string;
    readonly uid: string;
    readonly accountId?: string;
    readonly acr?: string;
    readonly amr?: string[];
    readonly loginTs?: number;
  }

  export namespace interactionPolicy {
    class Check {
      constructor(
        reason: string,
        description: string,
        check: (ctx: KoaContextWithOIDC) => boolean | Promise<boolean>,
        details?: (ctx: KoaContextWithOIDC) => UnknownObject,
      );
      static readonly REQUEST_PROMPT: true;
      static readonly NO_NEED_TO_PROMPT: false;
    }
    interface Prompt {
      readonly name: string;
      readonly checks: { add(check: Check, index?: number): void; get(reason: string): Check | undefined };
    }
    interface Policy extends Array<Prompt> {
      get(name: string): Prompt | undefined;
    }
    function base(): Policy;
  }

  export class Grant {
    constructor(properties: { accountId: string; clientId: string });
    readonly jti: string;
    addOIDCScope(scope: string): void;
    addOIDCClaims(claims: string[]): void;
    addResourceScope(resource: string, scope: string): void;
    /** The granted OpenID scopes that are also in `filter`, space-separated. */
    getOIDCScopeFiltered(filter: Set<string>): string;
    save(ttl?: number): Promise<string>;
    static find(id: string): Promise<Grant | undefined>;
  }

  export interface ClientConstructor {
    readonly prototype: Client;
    find(id: string): Promise<Client | undefined>;
  }

  export interface ErrorOut {
    error: string;
    error_description?: string;
    state?: string;
    [key: string]: unknown;
  }

  export interface Configuration {
    adapter?: (name: string) => Adapter;
    clients?: ClientMetadata[];
    jwks?: { keys: UnknownObject[] };
    cookies?: {
      keys?: string[];
      names?: { session?: string; interaction?: string; resume?: string };
      long?: UnknownObject;
      short?: UnknownObject;
    };
    claims?: Record<string, string[] | null>;
    scopes?: string[];
    responseTypes?: string[];
    clientAuthMethods?: string[];
    clockTolerance?: number;
    conformIdTokenClaims?: boolean;
    pkce?: { required?: (ctx: KoaContextWithOIDC, client: Client) => boolean };
    ttl?: Record<string, number>;
    interactions?: {
      url?: (ctx: KoaContextWithOIDC, interaction: { uid: string }) => string | Promise<string>;
      policy?: interactionPolicy.Policy;
    };
    acrValues?: string[];
    findAccount?: (ctx: KoaContextWithOIDC, sub: string, token?: BaseToken) => Promise<Account | undefined>;
    issueRefreshToken?: (ctx: KoaContextWithOIDC, client: Client, code: { scopes: Set<string> }) => Promise<boolean>;
    extraTokenClaims?: (ctx: KoaContextWithOIDC, token: BaseToken) => Promise<UnknownObject | undefined>;
    clientBasedCORS?: (ctx: KoaContextWithOIDC, origin: string, client: Client) => boolean;
    renderError?: (ctx: KoaContextWithOIDC, out: ErrorOut, error: Error) => void | Promise<void>;
    features?: {
      devInteractions?: { enabled: boolean };
      introspection?: { enabled: boolean };
      revocation?: {
        enabled: boolean;
        allowedPolicy?: (ctx: KoaContextWithOIDC, client: Client, token: BaseToken) => Promise<boolean>;
      };
      rpInitiatedLogout?: {
        enabled: boolean;
        logoutSource?: (ctx: KoaContextWithOIDC, form: string) => void | Promise<void>;
        postLogoutSuccessSource?: (ctx: KoaContextWithOIDC) => void | Promise<void>;
      };
      resourceIndicators?: {
        enabled: boolean;
        defaultResource?: (
          ctx: KoaContextWithOIDC,
          client: Client,
          oneOf?: string[],
        ) => Promise<string | string[] | undefined>;
        useGrantedResource?: (ctx: KoaContextWithOIDC, model: unknown) => Promise<boolean>;
        getResourceServerInfo?: (
          ctx: KoaContextWithOIDC,
          resourceIndicator: string,
          client: Client,
        ) => Promise<ResourceServerInfo>;
      };
      [feature: string]: unknown;
    };
    [key: string]: unknown;
  }

  class Provider extends EventEmitter {
    constructor(issuer: string, configuration?: Configuration);
    readonly issuer: string;
    proxy: boolean;
    readonly Client: ClientConstructor;
    readonly Grant: typeof Grant;
    readonly AccessToken: AccessTokenConstructor;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    /** Stores an interaction's result without finishing it; resolves to the URL that would resume it. */
    interactionResult(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResults,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<string>;
    /** A Koa context for a request outside oidc-provider's own routes (for `Session.get`). */
    createContext(req: IncomingMessage, res: ServerResponse): unknown;
    readonly Session: { get(ctx: unknown): Promise<Session> };
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: InteractionResults,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
  }

  export class OIDCProviderError extends Error {
    constructor(status: number, message: string);
    readonly error: string;
    readonly error_description?: string;
    readonly status: number;
    readonly statusCode: number;
    expose: boolean;
  }

  export const errors: {
    readonly OIDCProviderError: typeof OIDCProviderError;
    readonly InvalidTarget: new (description?: string) => OIDCProviderError;
    readonly SessionNotFound: new (description?: string) => OIDCProviderError;
    readonly AccessDenied: new (description?: string) => OIDCProviderError;
  };

  export { Provider };
  export default Provider;
}
