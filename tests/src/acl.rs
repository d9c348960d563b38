//! ACLs over raw requests (kafka-protocol), for tests that set them up.

use crate::raw;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;
use std::net::SocketAddr;

/// Kafka's LITERAL pattern type.
pub const LITERAL: i8 = 3;

/// A LITERAL ACL on any host.
pub fn creation(
    resource_type: i8,
    name: &str,
    principal: &str,
    operation: i8,
    permission: i8,
) -> AclCreation {
    let mut c = AclCreation::default();
    c.resource_type = resource_type;
    c.resource_name = StrBytes::from_string(name.to_string());
    c.resource_pattern_type = LITERAL;
    c.principal = StrBytes::from_string(principal.to_string());
    c.host = StrBytes::from_static_str("*");
    c.operation = operation;
    c.permission_type = permission;
    c
}

/// CreateAcls on `addr`: each creation's error code.
pub fn create_acls(addr: SocketAddr, creations: Vec<AclCreation>) -> Vec<i16> {
    let mut request = CreateAclsRequest::default();
    request.creations = creations;
    let response: CreateAclsResponse =
        raw::request(addr, ApiKey::CreateAcls, 3, &request).expect("CreateAcls answered");
    response.results.iter().map(|r| r.error_code).collect()
}
