//! The `UserService` calls on users themselves: `ListUsers`, `GetUser`, `CreateUser` (with its
//! optional first password), `UpdateUser` and `DeleteUser`, each under the grant rule and the
//! last-enabled-admin rule where they apply.
//!
//! A disable ends every session of the user once it is written, and a re-enable ends them again
//! before it is written, so a refresh token stolen before a disable never works again: a user
//! disabled by any other path (`kubectl`) comes back through here with no session, and the
//! admission webhook refuses a `kubectl` re-enable while a session from before remains. A
//! re-enable, like a grant, needs the right to grant each of the user's roles, and so do taking
//! a role away, a disable and a delete (each judged on the roles the user held), so a demoted,
//! disabled or re-created admin never becomes a user its demoter may set the password of. Every
//! call that changes a user reads the caller afresh (`Gate::Change`): a caller disabled or
//! demoted a moment ago acts with what it holds now.

use ichor_renderers::{
    auth::{
        Password,
        credentials::CredentialsEntry,
        roles::{
            UserAct, UserChange, UserState, acts_taking_away, check_act_on, check_grant, check_last_admin,
        },
    },
    crd::{IchorUser, IchorUserSpec, NAMESPACE},
};
use tonic::Request;

use super::{Gate, UserApi, passwords::generated_password};
use crate::{
    api::{
        access::{self, AccessReview},
        auth::BearerVerifier,
        backend::UserBackend,
        error::ApiError,
        proto::{
            CreateUserRequest, CreateUserResponse, DeleteUserRequest, DeleteUserResponse, GetUserRequest,
            GetUserResponse, ListUsersRequest, ListUsersResponse, UpdateUserRequest, UpdateUserResponse,
            create_user_request::InitialPassword,
        },
        validate,
    },
    store::{Change, modify_credentials},
};

impl<B, A, V> UserApi<B, A, V>
where
    B: UserBackend,
    A: AccessReview,
    V: BearerVerifier,
{
    pub(super) async fn list_users_impl(
        &self,
        request: Request<ListUsersRequest>,
    ) -> Result<ListUsersResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        self.require(&caller, &[access::ichorusers("list", "")]).await?;
        let mut users = Vec::new();
        for user in self.inner.store.list_users().await? {
            users.push(self.user_message(user).await?);
        }
        Ok(ListUsersResponse { users })
    }

    pub(super) async fn get_user_impl(
        &self,
        request: Request<GetUserRequest>,
    ) -> Result<GetUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Normal).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(&caller, &[access::ichorusers("get", name.as_str())])
            .await?;
        let user = self
            .inner
            .store
            .get_user(name.as_str())
            .await?
            .ok_or_else(|| ApiError::NotFound(name.to_string()))?;
        Ok(GetUserResponse {
            user: Some(self.user_message(user).await?),
        })
    }

    pub(super) async fn create_user_impl(
        &self,
        request: Request<CreateUserRequest>,
    ) -> Result<CreateUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let req = request.into_inner();
        // Validate everything first.
        let name = validate::user_name("name", &req.name)?;
        validate::display_name(&req.display_name)?;
        validate::email(&req.email)?;
        validate::roles(&req.roles)?;
        let (password, generated) = match req.initial_password {
            Some(InitialPassword::Password(p)) => {
                let p = Password::new(p);
                validate::new_password("password", &p)?;
                (Some(p), false)
            }
            Some(InitialPassword::GeneratePassword(true)) => (Some(generated_password()?), true),
            Some(InitialPassword::GeneratePassword(false)) | None => (None, false),
        };
        let mut asks = vec![access::ichorusers("create", "")];
        if password.is_some() {
            asks.push(access::password(name.as_str()));
        }
        self.require(&caller, &asks).await?;
        // The grant rule limits Ichor's own users; an external caller has no Ichor roles and
        // Kubernetes RBAC is its only gate (the admission webhook's rule too).
        if caller.external.is_none() {
            check_grant(&caller.roles, &[] as &[&str], &req.roles)?;
        }
        let generated_password = match (&password, generated) {
            (Some(p), true) => p.expose().to_owned(),
            _ => String::new(),
        };
        let now = self.inner.clock.now();
        let entry = match password {
            Some(p) => Some(CredentialsEntry::new(self.hash(&caller, p).await?, now, true)),
            None => None,
        };
        let spec = IchorUserSpec {
            display_name: non_empty(req.display_name),
            email: non_empty(req.email),
            roles: req.roles,
            disabled: req.disabled,
        };
        let mut object = IchorUser::new(name.as_str(), spec);
        object.metadata.namespace = Some(NAMESPACE.to_owned());
        // A stale entry of an earlier user of this name goes first: the admission webhook refuses
        // to create a user over one (it would hand the new user the old password and sessions).
        self.inner.store.invalidate(name.as_str());
        if self.inner.store.get_user(name.as_str()).await?.is_none() {
            modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
                Ok::<_, ApiError>(match current {
                    Some(_) => Change::Remove(()),
                    None => Change::Keep(()),
                })
            })
            .await?;
        }
        // Write the user, then the credentials; undo the user if the credentials fail.
        let created = self.inner.store.create_user(&caller, &object).await?;
        // A stale entry of an earlier user of this name must never let the new one sign in.
        let written = modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            Ok::<_, ApiError>(match (&entry, current) {
                (Some(entry), _) => Change::Put(entry.clone(), ()),
                (None, Some(_)) => Change::Remove(()),
                (None, None) => Change::Keep(()),
            })
        })
        .await;
        if let Err(error) = written {
            if let Err(undo) = self
                .inner
                .store
                .undo_create(&caller, name.as_str(), &created)
                .await
            {
                tracing::error!(user = %name, %undo, "could not remove a user whose credentials write failed");
            }
            self.forget(name.as_str());
            return Err(error);
        }
        self.forget(name.as_str());
        let user = self.existing_user(name.as_str()).await?;
        Ok(CreateUserResponse {
            user: Some(self.user_message(user).await?),
            generated_password,
        })
    }

    pub(super) async fn update_user_impl(
        &self,
        request: Request<UpdateUserRequest>,
    ) -> Result<UpdateUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let req = request.into_inner();
        let name = validate::user_name("name", &req.name)?;
        if let Some(d) = &req.display_name {
            validate::display_name(d)?;
        }
        if let Some(e) = &req.email {
            validate::email(e)?;
        }
        if let Some(list) = &req.roles {
            validate::roles(&list.roles)?;
        }
        self.require(&caller, &[access::ichorusers("update", name.as_str())])
            .await?;
        let old = self.existing_user(name.as_str()).await?;
        let new_roles = req.roles.map_or_else(|| old.roles.clone(), |l| l.roles);
        let new_disabled = req.disabled.unwrap_or(old.disabled);
        let enabling = old.disabled && !new_disabled;
        let disabling = !old.disabled && new_disabled;
        if caller.external.is_none() {
            check_grant(&caller.roles, &old.roles, &new_roles)?;
            let new_state = Some((new_roles.as_slice(), new_disabled));
            for act in acts_taking_away(&old.roles, old.disabled, new_state) {
                check_act_on(&caller.roles, act, name.as_str(), &old.roles)?;
            }
            if enabling {
                check_act_on(&caller.roles, UserAct::Enable, name.as_str(), &new_roles)?;
            }
        }
        let others = self.all_users().await?;
        check_last_admin(
            name.as_str(),
            &UserChange::Update {
                old: UserState {
                    roles: &old.roles,
                    disabled: old.disabled,
                },
                new: UserState {
                    roles: &new_roles,
                    disabled: new_disabled,
                },
            },
            others
                .iter()
                .map(|u| (u.name.as_str(), u.roles.as_slice(), u.disabled)),
        )?;
        let spec = IchorUserSpec {
            display_name: req.display_name.map_or(old.display_name, non_empty),
            email: req.email.map_or(old.email, non_empty),
            roles: new_roles,
            disabled: new_disabled,
        };
        let mut object = IchorUser::new(name.as_str(), spec);
        object.metadata.namespace = Some(NAMESPACE.to_owned());
        if enabling {
            // Sessions from before the disable stay ended (refused if this fails: fail closed).
            self.end_sessions(name.as_str()).await?;
        }
        self.inner.store.update_user(&caller, &object).await?;
        self.forget(name.as_str());
        if disabling && let Err(error) = self.end_sessions(name.as_str()).await {
            // The user is disabled, so no session of it works; a re-enable ends them first.
            tracing::warn!(user = %name, %error, "disabled user's sessions not ended");
        }
        let user = self.existing_user(name.as_str()).await?;
        Ok(UpdateUserResponse {
            user: Some(self.user_message(user).await?),
        })
    }

    pub(super) async fn delete_user_impl(
        &self,
        request: Request<DeleteUserRequest>,
    ) -> Result<DeleteUserResponse, ApiError> {
        let caller = self.authenticate(&request, Gate::Change).await?;
        let name = validate::user_name("name", &request.get_ref().name)?;
        self.require(&caller, &[access::ichorusers("delete", name.as_str())])
            .await?;
        let old = self.existing_user(name.as_str()).await?;
        if caller.external.is_none() {
            check_act_on(&caller.roles, UserAct::Delete, name.as_str(), &old.roles)?;
        }
        let others = self.all_users().await?;
        check_last_admin(
            name.as_str(),
            &UserChange::Delete {
                old: UserState {
                    roles: &old.roles,
                    disabled: old.disabled,
                },
            },
            others
                .iter()
                .map(|u| (u.name.as_str(), u.roles.as_slice(), u.disabled)),
        )?;
        self.inner.store.delete_user(&caller, name.as_str()).await?;
        let removed = modify_credentials(self.inner.store.as_ref(), name.as_str(), |current| {
            Ok::<_, ApiError>(if current.is_some() {
                Change::Remove(())
            } else {
                Change::Keep(())
            })
        })
        .await;
        if let Err(error) = removed {
            // The user is gone, so the entry signs nobody in; garbage collection removes it.
            tracing::warn!(user = %name, %error, "deleted user's credentials entry not removed");
        }
        self.forget(name.as_str());
        Ok(DeleteUserResponse {})
    }
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}
