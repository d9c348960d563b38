//! [`Authorizer`]: Kafka's `StandardAuthorizer` decision over a set of ACLs,
//! pure (no I/O, no shard): the ACLs of the metadata image, `super.users`
//! and `allow.everyone.if.no.acl.found` in, allowed or denied out.
//!
//! The rules, as Kafka's:
//! - a super user is allowed everything, DENY ACLs included;
//! - the ACLs that apply to a resource are the LITERAL ones of its name, the
//!   LITERAL ones named `*`, and the PREFIXED ones whose name starts it;
//! - of those, the ones whose principal is the caller's or `User:*` and
//!   whose host is the caller's address or `*` count;
//! - a counting DENY for the operation (or ALL) denies; else a counting
//!   ALLOW for the operation, ALL or an operation that implies it (READ,
//!   WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies
//!   DESCRIBE_CONFIGS) allows;
//! - else, when no ACL at all applies to the resource (whoever it names),
//!   `allow.everyone.if.no.acl.found` decides; otherwise denied.

use super::model::{
    AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
};
use crate::Principal;
use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

/// The ACLs of one resource type, indexed for the lookups `authorize` does.
#[derive(Debug, Default)]
struct TypeAcls {
    /// LITERAL ACLs by resource name (`*` included).
    literal: HashMap<String, Vec<AclBinding>>,
    /// PREFIXED ACLs (scanned: they are few).
    prefixed: Vec<AclBinding>,
}

/// The decision function. Cheap to query, rebuilt when the ACLs change.
#[derive(Debug, Default)]
pub struct Authorizer {
    super_users: BTreeSet<String>,
    allow_everyone_if_no_acl_found: bool,
    by_type: HashMap<ResourceType, TypeAcls>,
}

impl Authorizer {
    /// An authorizer over `acls`. `super_users` are `Type:name` strings.
    pub fn new(
        super_users: impl IntoIterator<Item = String>,
        allow_everyone_if_no_acl_found: bool,
        acls: impl IntoIterator<Item = AclBinding>,
    ) -> Authorizer {
        let mut by_type: HashMap<ResourceType, TypeAcls> = HashMap::new();
        for acl in acls {
            let entry = by_type.entry(acl.resource_type).or_default();
            match acl.pattern_type {
                PatternType::Prefixed => entry.prefixed.push(acl),
                _ => entry
                    .literal
                    .entry(acl.resource_name.clone())
                    .or_default()
                    .push(acl),
            }
        }
        Authorizer {
            super_users: super_users.into_iter().collect(),
            allow_everyone_if_no_acl_found,
            by_type,
        }
    }

    /// Whether `principal` is a super user.
    pub fn is_super_user(&self, principal: &Principal) -> bool {
        self.super_users.contains(&principal.to_string())
    }

    /// Whether `principal`, connected from `host`, may do `operation` on the
    /// resource `resource_type`/`name`.
    pub fn authorize(
        &self,
        principal: &Principal,
        host: Option<IpAddr>,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(principal) {
            return true;
        }
        let who = Who::new(principal, host);
        let applying: Vec<&AclBinding> = match self.by_type.get(&resource_type) {
            Some(acls) => {
                let literal = [name, WILDCARD_RESOURCE]
                    .into_iter()
                    .filter_map(|n| acls.literal.get(n))
                    .flatten();
                let prefixed = acls
                    .prefixed
                    .iter()
                    .filter(|acl| name.starts_with(&acl.resource_name));
                literal.chain(prefixed).collect()
            }
            None => Vec::new(),
        };
        if applying.is_empty() {
            return self.allow_everyone_if_no_acl_found;
        }
        let counting = || applying.iter().filter(|acl| who.matches(acl));
        if counting()
            .any(|acl| acl.permission == Permission::Deny && acl.operation.deny_refuses(operation))
        {
            return false;
        }
        counting()
            .any(|acl| acl.permission == Permission::Allow && acl.operation.allow_grants(operation))
    }

    /// Whether `principal` may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`: an idempotent
    /// producer without IDEMPOTENT_WRITE needs WRITE on some topic). Denied
    /// when a DENY covers every name (`*` literal or an empty prefix), or
    /// when no ALLOW pattern survives the DENYs of the same or a shorter
    /// prefix.
    pub fn authorize_any(
        &self,
        principal: &Principal,
        host: Option<IpAddr>,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka checks a made-up name first, so that super users and
        // `allow.everyone.if.no.acl.found` answer as for any one resource.
        if self.authorize(principal, host, operation, resource_type, "hardcode") {
            return true;
        }
        let who = Who::new(principal, host);
        let Some(acls) = self.by_type.get(&resource_type) else {
            return false;
        };
        let all: Vec<&AclBinding> = acls
            .literal
            .values()
            .flatten()
            .chain(&acls.prefixed)
            .filter(|acl| who.matches(acl))
            .collect();
        let denies: Vec<&AclBinding> = all
            .iter()
            .copied()
            .filter(|acl| {
                acl.permission == Permission::Deny && acl.operation.deny_refuses(operation)
            })
            .collect();
        let denied = |acl: &AclBinding| {
            denies.iter().any(|deny| match deny.pattern_type {
                PatternType::Prefixed => acl.resource_name.starts_with(&deny.resource_name),
                _ => {
                    deny.resource_name == WILDCARD_RESOURCE
                        || (acl.pattern_type == PatternType::Literal
                            && deny.resource_name == acl.resource_name)
                }
            })
        };
        all.iter().any(|acl| {
            acl.permission == Permission::Allow
                && acl.operation.allow_grants(operation)
                && !denied(acl)
        })
    }
}

/// The caller, as ACL principals and hosts name it.
struct Who {
    principal: String,
    host: Option<String>,
}

impl Who {
    fn new(principal: &Principal, host: Option<IpAddr>) -> Who {
        Who {
            principal: principal.to_string(),
            host: host.map(|ip| ip.to_string()),
        }
    }

    fn matches(&self, acl: &AclBinding) -> bool {
        (acl.principal == self.principal || acl.principal == WILDCARD_PRINCIPAL)
            && (acl.host == WILDCARD_HOST || Some(&acl.host) == self.host.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Operation::*;
    use PatternType::*;
    use Permission::*;
    use ResourceType::*;

    fn acl(
        resource_type: ResourceType,
        name: &str,
        pattern: PatternType,
        principal: &str,
        host: &str,
        operation: Operation,
        permission: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        }
    }

    fn alice() -> Principal {
        Principal::user("alice")
    }

    fn ip(text: &str) -> Option<IpAddr> {
        text.parse().ok()
    }

    /// (ACLs, operation, resource type, name, expected) with alice asking
    /// from 10.0.0.1, no super users, `allow.everyone.if.no.acl.found` off.
    #[test]
    fn standard_authorizer_rules() {
        let a = |t, n, p, op, perm| acl(t, n, p, "User:alice", "*", op, perm);
        let table: Vec<(Vec<AclBinding>, Operation, ResourceType, &str, bool)> = vec![
            // No ACL at all: denied (allow.everyone off).
            (vec![], Read, Topic, "t", false),
            // Exact literal ALLOW.
            (
                vec![a(Topic, "t", Literal, Read, Allow)],
                Read,
                Topic,
                "t",
                true,
            ),
            // Another operation is not granted.
            (
                vec![a(Topic, "t", Literal, Read, Allow)],
                Write,
                Topic,
                "t",
                false,
            ),
            // Another resource is not granted (and has no ACL: denied).
            (
                vec![a(Topic, "t", Literal, Read, Allow)],
                Read,
                Topic,
                "u",
                false,
            ),
            // Another resource type.
            (
                vec![a(Topic, "t", Literal, Read, Allow)],
                Read,
                Group,
                "t",
                false,
            ),
            // Wildcard resource name.
            (
                vec![a(Topic, "*", Literal, Read, Allow)],
                Read,
                Topic,
                "any",
                true,
            ),
            // Prefixed.
            (
                vec![a(Topic, "pay", Prefixed, Write, Allow)],
                Write,
                Topic,
                "payments",
                true,
            ),
            (
                vec![a(Topic, "pay", Prefixed, Write, Allow)],
                Write,
                Topic,
                "pa",
                false,
            ),
            // A literal name is not a prefix.
            (
                vec![a(Topic, "pay", Literal, Write, Allow)],
                Write,
                Topic,
                "payments",
                false,
            ),
            // ALL grants everything.
            (
                vec![a(Cluster, "kafka-cluster", Literal, All, Allow)],
                ClusterAction,
                Cluster,
                "kafka-cluster",
                true,
            ),
            // Implied DESCRIBE.
            (
                vec![a(Topic, "t", Literal, Read, Allow)],
                Describe,
                Topic,
                "t",
                true,
            ),
            (
                vec![a(Topic, "t", Literal, Write, Allow)],
                Describe,
                Topic,
                "t",
                true,
            ),
            (
                vec![a(Topic, "t", Literal, Delete, Allow)],
                Describe,
                Topic,
                "t",
                true,
            ),
            (
                vec![a(Topic, "t", Literal, Alter, Allow)],
                Describe,
                Topic,
                "t",
                true,
            ),
            (
                vec![a(Topic, "t", Literal, Create, Allow)],
                Describe,
                Topic,
                "t",
                false,
            ),
            (
                vec![a(Topic, "t", Literal, AlterConfigs, Allow)],
                DescribeConfigs,
                Topic,
                "t",
                true,
            ),
            (
                vec![a(Topic, "t", Literal, DescribeConfigs, Allow)],
                AlterConfigs,
                Topic,
                "t",
                false,
            ),
            // DESCRIBE does not imply READ.
            (
                vec![a(Topic, "t", Literal, Describe, Allow)],
                Read,
                Topic,
                "t",
                false,
            ),
            // DENY wins over ALLOW, whatever the patterns.
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    a(Topic, "t", Literal, Read, Deny),
                ],
                Read,
                Topic,
                "t",
                false,
            ),
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    a(Topic, "*", Literal, Read, Deny),
                ],
                Read,
                Topic,
                "t",
                false,
            ),
            (
                vec![
                    a(Topic, "*", Literal, All, Allow),
                    a(Topic, "t", Prefixed, All, Deny),
                ],
                Write,
                Topic,
                "tx",
                false,
            ),
            // A DENY of READ does not imply a DENY of DESCRIBE.
            (
                vec![
                    a(Topic, "t", Literal, All, Allow),
                    a(Topic, "t", Literal, Read, Deny),
                ],
                Describe,
                Topic,
                "t",
                true,
            ),
            // A DENY of another operation does not refuse.
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    a(Topic, "t", Literal, Write, Deny),
                ],
                Read,
                Topic,
                "t",
                true,
            ),
            // DENY ALL refuses everything.
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    a(Topic, "t", Literal, All, Deny),
                ],
                Read,
                Topic,
                "t",
                false,
            ),
            // ACLs of someone else: the resource has ACLs, so denied.
            (
                vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)],
                Read,
                Topic,
                "t",
                false,
            ),
            // Wildcard principal.
            (
                vec![acl(Topic, "t", Literal, "User:*", "*", Read, Allow)],
                Read,
                Topic,
                "t",
                true,
            ),
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    acl(Topic, "t", Literal, "User:*", "*", Read, Deny),
                ],
                Read,
                Topic,
                "t",
                false,
            ),
            // Host.
            (
                vec![acl(
                    Topic,
                    "t",
                    Literal,
                    "User:alice",
                    "10.0.0.1",
                    Read,
                    Allow,
                )],
                Read,
                Topic,
                "t",
                true,
            ),
            (
                vec![acl(
                    Topic,
                    "t",
                    Literal,
                    "User:alice",
                    "10.0.0.2",
                    Read,
                    Allow,
                )],
                Read,
                Topic,
                "t",
                false,
            ),
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    acl(Topic, "t", Literal, "User:alice", "10.0.0.2", Read, Deny),
                ],
                Read,
                Topic,
                "t",
                true,
            ),
            (
                vec![
                    a(Topic, "t", Literal, Read, Allow),
                    acl(Topic, "t", Literal, "User:alice", "10.0.0.1", Read, Deny),
                ],
                Read,
                Topic,
                "t",
                false,
            ),
        ];
        for (i, (acls, op, resource_type, name, expected)) in table.into_iter().enumerate() {
            let authorizer = Authorizer::new(Vec::new(), false, acls);
            assert_eq!(
                authorizer.authorize(&alice(), ip("10.0.0.1"), op, resource_type, name),
                expected,
                "row {i}: {op:?} {resource_type:?} {name}"
            );
        }
    }

    #[test]
    fn allow_everyone_if_no_acl_found_applies_only_to_resources_without_acls() {
        let acls = vec![acl(Topic, "t", Literal, "User:bob", "*", Read, Allow)];
        let authorizer = Authorizer::new(Vec::new(), true, acls);
        assert!(authorizer.authorize(&alice(), None, Write, Topic, "other",));
        assert!(authorizer.authorize(&alice(), None, Create, Cluster, "kafka-cluster"));
        // `t` has an ACL (bob's): alice is denied, bob is allowed.
        assert!(!authorizer.authorize(&alice(), None, Read, Topic, "t"));
        assert!(authorizer.authorize(&Principal::user("bob"), None, Read, Topic, "t"));
        // A wildcard or prefixed ACL makes every name it covers "has ACLs".
        let acls = vec![acl(Topic, "p", Prefixed, "User:bob", "*", Read, Allow)];
        let authorizer = Authorizer::new(Vec::new(), true, acls);
        assert!(!authorizer.authorize(&alice(), None, Read, Topic, "pq"));
        assert!(authorizer.authorize(&alice(), None, Read, Topic, "q"));
    }

    #[test]
    fn super_users_bypass_deny() {
        let acls = vec![acl(Topic, "*", Literal, "User:*", "*", All, Deny)];
        let authorizer = Authorizer::new(vec!["User:admin".to_string()], false, acls);
        assert!(authorizer.is_super_user(&Principal::user("admin")));
        assert!(authorizer.authorize(&Principal::user("admin"), None, Write, Topic, "t"));
        assert!(authorizer.authorize(
            &Principal::user("admin"),
            None,
            Alter,
            Cluster,
            "kafka-cluster"
        ));
        assert!(!authorizer.authorize(&alice(), None, Write, Topic, "t"));
        // Principal types differ: `Group:admin` is not `User:admin`.
        let other = Principal::parse("Group:admin").unwrap();
        assert!(!authorizer.authorize(&other, None, Write, Topic, "t"));
    }

    #[test]
    fn authorize_any_is_kafkas_by_resource_type() {
        let a = |n, p, op, perm| acl(Topic, n, p, "User:alice", "*", op, perm);
        let table: Vec<(Vec<AclBinding>, bool, bool)> = vec![
            (vec![], false, false),
            (vec![], true, true),
            (vec![a("t", Literal, Write, Allow)], false, true),
            (vec![a("t", Prefixed, All, Allow)], false, true),
            (vec![a("t", Literal, Read, Allow)], false, false),
            (
                vec![a("t", Literal, Write, Allow), a("*", Literal, Write, Deny)],
                false,
                false,
            ),
            (
                vec![a("t", Literal, Write, Allow), a("t", Literal, Write, Deny)],
                false,
                false,
            ),
            (
                vec![
                    a("tx", Literal, Write, Allow),
                    a("t", Prefixed, Write, Deny),
                ],
                false,
                false,
            ),
            (
                vec![
                    a("tx", Literal, Write, Allow),
                    a("u", Prefixed, Write, Deny),
                ],
                false,
                true,
            ),
            (
                vec![acl(Topic, "t", Literal, "User:bob", "*", Write, Allow)],
                false,
                false,
            ),
        ];
        for (i, (acls, allow_everyone, expected)) in table.into_iter().enumerate() {
            let authorizer = Authorizer::new(Vec::new(), allow_everyone, acls);
            assert_eq!(
                authorizer.authorize_any(&alice(), None, Write, Topic),
                expected,
                "row {i}"
            );
        }
    }
}
