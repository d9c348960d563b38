//! [`Authz`]: one request's authorization questions, with Kafka's error
//! code for each refusal, so that a handler gains a line per check:
//!
//! ```text
//! let authz = cluster_runtime::authz(&shard, &request.session);
//! authz.topic(Operation::Write, &name)?;             // TOPIC_AUTHORIZATION_FAILED
//! authz.group(Operation::Read, &group)?;             // GROUP_AUTHORIZATION_FAILED
//! authz.cluster(Operation::Alter)?;                  // CLUSTER_AUTHORIZATION_FAILED
//! authz.transactional_id(Operation::Write, &id)?;    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//! if authz.allows_topic(Operation::Describe, &name) { .. }   // a bare yes/no
//! ```
//!
//! Without an authorizer (`authorizer.class.name` unset) every question is
//! answered yes, as Kafka answers.

use super::authorizer::Authorizer;
use super::model::{Operation, ResourceType, CLUSTER_NAME};
use crate::{Principal, Session};
use engine::ErrorCode;
use std::net::IpAddr;
use std::rc::Rc;

/// The authorizer (if enabled) and who asks.
#[derive(Debug, Clone)]
pub struct Authz {
    /// The authorizer and the caller; `None`: no authorizer (and no copy
    /// of the principal made on the hot path).
    asked: Option<(Rc<Authorizer>, Principal)>,
    host: Option<IpAddr>,
}

impl Authz {
    /// `session`'s questions to `authorizer` (`None`: no authorizer, all
    /// allowed).
    pub fn new(authorizer: Option<Rc<Authorizer>>, session: &Session) -> Authz {
        Authz {
            asked: authorizer.map(|authorizer| (authorizer, session.principal())),
            host: session.peer,
        }
    }

    /// Everything allowed (no authorizer): internal work and tests.
    pub fn allow_all() -> Authz {
        Authz {
            asked: None,
            host: None,
        }
    }

    /// Whether an authorizer is configured (the ACL APIs answer
    /// SECURITY_DISABLED without one).
    pub fn enabled(&self) -> bool {
        self.asked.is_some()
    }

    /// Whether `operation` on `resource_type`/`name` is allowed.
    pub fn allows(&self, operation: Operation, resource_type: ResourceType, name: &str) -> bool {
        match &self.asked {
            None => true,
            Some((authorizer, principal)) => {
                authorizer.authorize(principal, self.host, operation, resource_type, name)
            }
        }
    }

    /// Whether `operation` on topic `name` is allowed.
    pub fn allows_topic(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Topic, name)
    }

    /// Whether `operation` on group `name` is allowed.
    pub fn allows_group(&self, operation: Operation, name: &str) -> bool {
        self.allows(operation, ResourceType::Group, name)
    }

    /// Whether `operation` on the cluster is allowed.
    pub fn allows_cluster(&self, operation: Operation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether `operation` on some resource of `resource_type` is allowed
    /// (Kafka's `authorizeByResourceType`).
    pub fn allows_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        match &self.asked {
            None => true,
            Some((authorizer, principal)) => {
                authorizer.authorize_any(principal, self.host, operation, resource_type)
            }
        }
    }

    /// `operation` on topic `name`, or TOPIC_AUTHORIZATION_FAILED.
    pub fn topic(&self, operation: Operation, name: &str) -> Result<(), ErrorCode> {
        self.allows_topic(operation, name)
            .then_some(())
            .ok_or(ErrorCode::TopicAuthorizationFailed)
    }

    /// `operation` on group `name`, or GROUP_AUTHORIZATION_FAILED.
    pub fn group(&self, operation: Operation, name: &str) -> Result<(), ErrorCode> {
        self.allows_group(operation, name)
            .then_some(())
            .ok_or(ErrorCode::GroupAuthorizationFailed)
    }

    /// Why an ACL API (CreateAcls, DeleteAcls, DescribeAcls) is refused:
    /// no authorizer configured (SECURITY_DISABLED), or no `operation` on
    /// the cluster (CLUSTER_AUTHORIZATION_FAILED); `None` when it may run.
    pub fn acl_api_refusal(&self, operation: Operation) -> Option<(ErrorCode, String)> {
        if !self.enabled() {
            return Some((
                ErrorCode::SecurityDisabled,
                String::from("no authorizer is configured"),
            ));
        }
        self.cluster(operation).err().map(|code| {
            (
                code,
                format!("{operation:?} on the cluster is needed for this ACL request"),
            )
        })
    }

    /// `operation` on the cluster, or CLUSTER_AUTHORIZATION_FAILED.
    pub fn cluster(&self, operation: Operation) -> Result<(), ErrorCode> {
        self.allows_cluster(operation)
            .then_some(())
            .ok_or(ErrorCode::ClusterAuthorizationFailed)
    }

    /// `operation` on transactional id `id`, or
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    pub fn transactional_id(&self, operation: Operation, id: &str) -> Result<(), ErrorCode> {
        self.allows(operation, ResourceType::TransactionalId, id)
            .then_some(())
            .ok_or(ErrorCode::TransactionalIdAuthorizationFailed)
    }

    /// CreateTopics and auto-creation: CREATE on the cluster or on the
    /// topic, or TOPIC_AUTHORIZATION_FAILED.
    pub fn create_topic(&self, name: &str) -> Result<(), ErrorCode> {
        if self.allows_cluster(Operation::Create) {
            return Ok(());
        }
        self.topic(Operation::Create, name)
    }

    /// DescribeConfigs / AlterConfigs / IncrementalAlterConfigs on a config
    /// resource (Kafka's `ConfigResource.Type` code): `operation` on the
    /// topic (TOPIC_AUTHORIZATION_FAILED) or, for a broker, broker-logger or
    /// client-metrics resource, on the cluster (CLUSTER_AUTHORIZATION_FAILED).
    /// Other types are left to the handler.
    pub fn config_resource(
        &self,
        operation: Operation,
        config_resource_type: i8,
        name: &str,
    ) -> Result<(), ErrorCode> {
        match config_resource_type {
            2 => self.topic(operation, name),
            // BROKER, BROKER_LOGGER and CLIENT_METRICS (KIP-714) resources
            // are the cluster's, as in Kafka.
            4 | 8 | 16 => self.cluster(operation),
            // GROUP resources are the group's, as in Kafka.
            32 => self.group(operation, name),
            _ => Ok(()),
        }
    }

    /// An idempotent producer without a transactional id (InitProducerId):
    /// IDEMPOTENT_WRITE on the cluster or WRITE on some topic, or
    /// CLUSTER_AUTHORIZATION_FAILED.
    pub fn idempotent_write(&self) -> Result<(), ErrorCode> {
        if self.allows_cluster(Operation::IdempotentWrite)
            || self.allows_any(Operation::Write, ResourceType::Topic)
        {
            return Ok(());
        }
        Err(ErrorCode::ClusterAuthorizationFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::model::{AclBinding, PatternType, Permission};

    fn binding(resource_type: ResourceType, name: &str, operation: Operation) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern_type: PatternType::Literal,
            principal: "User:ANONYMOUS".into(),
            host: "*".into(),
            operation,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn checks_answer_with_kafkas_codes() {
        let session = Session::internal();
        assert!(Authz::new(None, &session)
            .topic(Operation::Write, "t")
            .is_ok());
        assert!(!Authz::new(None, &session).enabled());
        let acls = vec![
            binding(ResourceType::Topic, "t", Operation::Read),
            binding(ResourceType::Group, "g", Operation::Read),
            binding(ResourceType::TransactionalId, "tx", Operation::Write),
            binding(ResourceType::Topic, "created", Operation::Create),
        ];
        let authz = Authz::new(
            Some(Rc::new(Authorizer::new(Vec::new(), false, acls))),
            &session,
        );
        assert!(authz.enabled());
        assert_eq!(authz.topic(Operation::Read, "t"), Ok(()));
        assert_eq!(authz.topic(Operation::Describe, "t"), Ok(()));
        assert_eq!(
            authz.topic(Operation::Write, "t"),
            Err(ErrorCode::TopicAuthorizationFailed)
        );
        assert_eq!(authz.group(Operation::Read, "g"), Ok(()));
        assert_eq!(
            authz.group(Operation::Read, "h"),
            Err(ErrorCode::GroupAuthorizationFailed)
        );
        assert_eq!(
            authz.cluster(Operation::Alter),
            Err(ErrorCode::ClusterAuthorizationFailed)
        );
        assert_eq!(authz.transactional_id(Operation::Write, "tx"), Ok(()));
        assert_eq!(
            authz.transactional_id(Operation::Write, "ty"),
            Err(ErrorCode::TransactionalIdAuthorizationFailed)
        );
        assert_eq!(authz.create_topic("created"), Ok(()));
        assert_eq!(
            authz.create_topic("other"),
            Err(ErrorCode::TopicAuthorizationFailed)
        );
        assert_eq!(
            authz.idempotent_write(),
            Err(ErrorCode::ClusterAuthorizationFailed)
        );
        let writer = Authz::new(
            Some(Rc::new(Authorizer::new(
                Vec::new(),
                false,
                vec![binding(ResourceType::Topic, "w", Operation::Write)],
            ))),
            &session,
        );
        assert_eq!(writer.idempotent_write(), Ok(()));
    }

    #[test]
    fn client_metrics_resources_are_the_clusters() {
        let session = Session::internal();
        let acls = vec![binding(ResourceType::Topic, "t", Operation::AlterConfigs)];
        let authz = Authz::new(
            Some(Rc::new(Authorizer::new(Vec::new(), false, acls))),
            &session,
        );
        assert_eq!(
            authz.config_resource(Operation::AlterConfigs, 16, "producers"),
            Err(ErrorCode::ClusterAuthorizationFailed)
        );
        assert_eq!(
            authz.config_resource(Operation::AlterConfigs, 2, "t"),
            Ok(())
        );
        let admin = Authz::new(
            Some(Rc::new(Authorizer::new(
                Vec::new(),
                false,
                vec![binding(
                    ResourceType::Cluster,
                    "kafka-cluster",
                    Operation::AlterConfigs,
                )],
            ))),
            &session,
        );
        assert_eq!(
            admin.config_resource(Operation::AlterConfigs, 16, "producers"),
            Ok(())
        );
    }
}
