/**
 * SCIM 2.0 provisioning (RFC 7643, RFC 7644) at /scim/v2: the directory's Users and Groups, and the discovery
 * documents. It speaks application/scim+json both ways and answers every failure in the SCIM error schema.
 */
export { createScimRouter, scimNotConfigured } from './router.js';
