// Code generated from the library's operation catalog (parley_operations) by internal/gencatalog; DO NOT EDIT.
// Regenerate with go generate ./... (in bindings/go) when the catalog changes (TestOperationsGenerated fails until then).

package parley

import (
	"context"
	"encoding/json"
)

// GetCurrentUserParams are the parameters of Client.GetCurrentUser, by their wire names (docs/PROTOCOL.md).
type GetCurrentUserParams struct {
	UserID             *string  `json:"user_id,omitempty"` // the connected user unless given
	IncludeUnreadCount *bool    `json:"include_unread_count,omitempty"`
	CustomTypes        []string `json:"custom_types,omitempty"`
	SuperMode          *string  `json:"super_mode,omitempty"`
}

// GetCurrentUser performs get_current_user: The connected user's profile, or with user_id another user's.
//
// GET /v3/users/{user_id}.
func (c *Client) GetCurrentUser(ctx context.Context, params GetCurrentUserParams) (User, error) {
	return performInto[User](ctx, c, "get_current_user", params)
}

// UpdateCurrentUserParams are the parameters of Client.UpdateCurrentUser, by their wire names (docs/PROTOCOL.md).
type UpdateCurrentUserParams struct {
	UserID             *string           `json:"user_id,omitempty"` // the connected user unless given
	Nickname           *string           `json:"nickname,omitempty"`
	ProfileURL         *string           `json:"profile_url,omitempty"`
	IsActive           *bool             `json:"is_active,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	DiscoveryKeys      []string          `json:"discovery_keys,omitempty"`
	PreferredLanguages []string          `json:"preferred_languages,omitempty"`
	LastSeenAt         *int64            `json:"last_seen_at,omitempty"`
}

// UpdateCurrentUser performs update_current_user: Changes the connected user's profile; answers the user.
//
// PUT /v3/users/{user_id}.
func (c *Client) UpdateCurrentUser(ctx context.Context, params UpdateCurrentUserParams) (User, error) {
	return performInto[User](ctx, c, "update_current_user", params)
}

// GetUnreadMessageCountParams are the parameters of Client.GetUnreadMessageCount, by their wire names (docs/PROTOCOL.md).
type GetUnreadMessageCountParams struct {
	UserID      *string  `json:"user_id,omitempty"` // the connected user unless given
	CustomTypes []string `json:"custom_types,omitempty"`
	SuperMode   *string  `json:"super_mode,omitempty"`
}

// GetUnreadMessageCount performs get_unread_message_count: The messages the user has not read: {"unread_count"}.
//
// GET /v3/users/{user_id}/unread_message_count.
func (c *Client) GetUnreadMessageCount(ctx context.Context, params GetUnreadMessageCountParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_unread_message_count", params)
}

// GetUnreadChannelCountParams are the parameters of Client.GetUnreadChannelCount, by their wire names (docs/PROTOCOL.md).
type GetUnreadChannelCountParams struct {
	UserID      *string  `json:"user_id,omitempty"` // the connected user unless given
	CustomTypes []string `json:"custom_types,omitempty"`
	SuperMode   *string  `json:"super_mode,omitempty"`
}

// GetUnreadChannelCount performs get_unread_channel_count: The channels with messages the user has not read: {"unread_count"}.
//
// GET /v3/users/{user_id}/unread_channel_count.
func (c *Client) GetUnreadChannelCount(ctx context.Context, params GetUnreadChannelCountParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_unread_channel_count", params)
}

// MarkAllAsReadParams are the parameters of Client.MarkAllAsRead, by their wire names (docs/PROTOCOL.md).
type MarkAllAsReadParams struct {
	UserID      *string  `json:"user_id,omitempty"` // the connected user unless given
	ChannelURLs []string `json:"channel_urls,omitempty"`
}

// MarkAllAsRead performs mark_all_as_read: Marks every joined channel (or those of channel_urls) read.
//
// PUT /v3/users/{user_id}/mark_as_read_all.
func (c *Client) MarkAllAsRead(ctx context.Context, params MarkAllAsReadParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "mark_all_as_read", params)
}

// GetChannelInvitationPreferenceParams are the parameters of Client.GetChannelInvitationPreference, by their wire names (docs/PROTOCOL.md).
type GetChannelInvitationPreferenceParams struct {
	UserID *string `json:"user_id,omitempty"` // the connected user unless given
}

// GetChannelInvitationPreference performs get_channel_invitation_preference: Whether the user joins the channels they are invited to at once: {"auto_accept"}.
//
// GET /v3/users/{user_id}/channel_invitation_preference.
func (c *Client) GetChannelInvitationPreference(ctx context.Context, params GetChannelInvitationPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_channel_invitation_preference", params)
}

// SetChannelInvitationPreferenceParams are the parameters of Client.SetChannelInvitationPreference, by their wire names (docs/PROTOCOL.md).
type SetChannelInvitationPreferenceParams struct {
	AutoAccept bool    `json:"auto_accept"`       // required
	UserID     *string `json:"user_id,omitempty"` // the connected user unless given
}

// SetChannelInvitationPreference performs set_channel_invitation_preference: Sets whether the user joins the channels they are invited to at once: {"auto_accept"}.
//
// PUT /v3/users/{user_id}/channel_invitation_preference.
func (c *Client) SetChannelInvitationPreference(ctx context.Context, params SetChannelInvitationPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "set_channel_invitation_preference", params)
}

// RegisterPushTokenParams are the parameters of Client.RegisterPushToken, by their wire names (docs/PROTOCOL.md).
type RegisterPushTokenParams struct {
	TokenType string  `json:"token_type,omitempty"` // required
	Token     string  `json:"token,omitempty"`      // required
	UserID    *string `json:"user_id,omitempty"`    // the connected user unless given
}

// RegisterPushToken performs register_push_token: Registers a device token of the user: token_type gcm (FCM), apns or huawei (HMS); answers {"token", "type", "user"}.
//
// POST /v3/users/{user_id}/push/{token_type}.
func (c *Client) RegisterPushToken(ctx context.Context, params RegisterPushTokenParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "register_push_token", params)
}

// UnregisterPushTokenParams are the parameters of Client.UnregisterPushToken, by their wire names (docs/PROTOCOL.md).
type UnregisterPushTokenParams struct {
	TokenType string  `json:"token_type,omitempty"` // required
	Token     string  `json:"token,omitempty"`      // required
	UserID    *string `json:"user_id,omitempty"`    // the connected user unless given
}

// UnregisterPushToken performs unregister_push_token: Unregisters one device token: {"token": [removed]}.
//
// DELETE /v3/users/{user_id}/push/{token_type}/{token}.
func (c *Client) UnregisterPushToken(ctx context.Context, params UnregisterPushTokenParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unregister_push_token", params)
}

// UnregisterAllPushTokensParams are the parameters of Client.UnregisterAllPushTokens, by their wire names (docs/PROTOCOL.md).
type UnregisterAllPushTokensParams struct {
	UserID *string `json:"user_id,omitempty"` // the connected user unless given
}

// UnregisterAllPushTokens performs unregister_all_push_tokens: Unregisters every device token of the user: {"token": [removed]}.
//
// DELETE /v3/users/{user_id}/push.
func (c *Client) UnregisterAllPushTokens(ctx context.Context, params UnregisterAllPushTokensParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unregister_all_push_tokens", params)
}

// ListPushTokensParams are the parameters of Client.ListPushTokens, by their wire names (docs/PROTOCOL.md).
type ListPushTokensParams struct {
	TokenType string  `json:"token_type,omitempty"` // required
	UserID    *string `json:"user_id,omitempty"`    // the connected user unless given
}

// ListPushTokens performs list_push_tokens: The user's device tokens of a type, oldest first: {"tokens", "type"}.
//
// GET /v3/users/{user_id}/push/{token_type}.
func (c *Client) ListPushTokens(ctx context.Context, params ListPushTokensParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_push_tokens", params)
}

// GetPushPreferenceParams are the parameters of Client.GetPushPreference, by their wire names (docs/PROTOCOL.md).
type GetPushPreferenceParams struct {
	UserID *string `json:"user_id,omitempty"` // the connected user unless given
}

// GetPushPreference performs get_push_preference: When the user is notified: push_trigger_option (all, mention_only, off), do not disturb (start_hour... in timezone) and snooze (snooze_start_ts, snooze_end_ts).
//
// GET /v3/users/{user_id}/push_preference.
func (c *Client) GetPushPreference(ctx context.Context, params GetPushPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_push_preference", params)
}

// SetPushPreferenceParams are the parameters of Client.SetPushPreference, by their wire names (docs/PROTOCOL.md).
type SetPushPreferenceParams struct {
	UserID            *string `json:"user_id,omitempty"` // the connected user unless given
	PushTriggerOption *string `json:"push_trigger_option,omitempty"`
	DoNotDisturb      *bool   `json:"do_not_disturb,omitempty"`
	StartHour         *int64  `json:"start_hour,omitempty"`
	StartMin          *int64  `json:"start_min,omitempty"`
	EndHour           *int64  `json:"end_hour,omitempty"`
	EndMin            *int64  `json:"end_min,omitempty"`
	Timezone          *string `json:"timezone,omitempty"`
	SnoozeEnabled     *bool   `json:"snooze_enabled,omitempty"`
	SnoozeStartTS     *int64  `json:"snooze_start_ts,omitempty"`
	SnoozeEndTS       *int64  `json:"snooze_end_ts,omitempty"`
}

// SetPushPreference performs set_push_preference: Changes the fields given of the user's push preference; answers all of them.
//
// PUT /v3/users/{user_id}/push_preference.
func (c *Client) SetPushPreference(ctx context.Context, params SetPushPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "set_push_preference", params)
}

// GetChannelPushPreferenceParams are the parameters of Client.GetChannelPushPreference, by their wire names (docs/PROTOCOL.md).
type GetChannelPushPreferenceParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`     // the connected user unless given
}

// GetChannelPushPreference performs get_channel_push_preference: The user's push trigger option for one channel: {"push_trigger_option"}, default following their own.
//
// GET /v3/users/{user_id}/push_preference/{channel_url}.
func (c *Client) GetChannelPushPreference(ctx context.Context, params GetChannelPushPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_channel_push_preference", params)
}

// SetChannelPushPreferenceParams are the parameters of Client.SetChannelPushPreference, by their wire names (docs/PROTOCOL.md).
type SetChannelPushPreferenceParams struct {
	ChannelURL        string  `json:"channel_url,omitempty"`         // required
	PushTriggerOption string  `json:"push_trigger_option,omitempty"` // required
	UserID            *string `json:"user_id,omitempty"`             // the connected user unless given
}

// SetChannelPushPreference performs set_channel_push_preference: Sets the user's push trigger option for one channel: default, all, mention_only or off.
//
// PUT /v3/users/{user_id}/push_preference/{channel_url}.
func (c *Client) SetChannelPushPreference(ctx context.Context, params SetChannelPushPreferenceParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "set_channel_push_preference", params)
}

// ListUsersParams are the parameters of Client.ListUsers, by their wire names (docs/PROTOCOL.md).
type ListUsersParams struct {
	Token              *string  `json:"token,omitempty"`
	Limit              *int64   `json:"limit,omitempty"`
	UserIDs            []string `json:"user_ids,omitempty"`
	Nickname           *string  `json:"nickname,omitempty"`
	NicknameStartswith *string  `json:"nickname_startswith,omitempty"`
	ActiveMode         *string  `json:"active_mode,omitempty"`
	Metadatakey        *string  `json:"metadatakey,omitempty"`
	MetadatavaluesIn   []string `json:"metadatavalues_in,omitempty"`
}

// ListUsers performs list_users: One page of users in user_id order, without their private fields.
//
// GET /v3/users.
func (c *Client) ListUsers(ctx context.Context, params ListUsersParams) (UserListPage, error) {
	return performInto[UserListPage](ctx, c, "list_users", params)
}

// ListMyGroupChannelsParams are the parameters of Client.ListMyGroupChannels, by their wire names (docs/PROTOCOL.md).
type ListMyGroupChannelsParams struct {
	UserID                  *string  `json:"user_id,omitempty"` // the connected user unless given
	Token                   *string  `json:"token,omitempty"`
	Limit                   *int64   `json:"limit,omitempty"`
	Order                   *string  `json:"order,omitempty"`
	MetadataOrderKey        *string  `json:"metadata_order_key,omitempty"`
	ShowEmpty               *bool    `json:"show_empty,omitempty"`
	ShowFrozen              *bool    `json:"show_frozen,omitempty"`
	ShowMember              *bool    `json:"show_member,omitempty"`
	ShowMetadata            *bool    `json:"show_metadata,omitempty"`
	ShowMetacounter         *bool    `json:"show_metacounter,omitempty"`
	ShowReadReceipt         *bool    `json:"show_read_receipt,omitempty"`
	ShowDeliveryReceipt     *bool    `json:"show_delivery_receipt,omitempty"`
	DistinctMode            *string  `json:"distinct_mode,omitempty"`
	SuperMode               *string  `json:"super_mode,omitempty"`
	MemberStateFilter       *string  `json:"member_state_filter,omitempty"`
	CustomTypes             []string `json:"custom_types,omitempty"`
	CustomTypeStartswith    *string  `json:"custom_type_startswith,omitempty"`
	ChannelURLs             []string `json:"channel_urls,omitempty"`
	Name                    *string  `json:"name,omitempty"`
	NameContains            *string  `json:"name_contains,omitempty"`
	NameStartswith          *string  `json:"name_startswith,omitempty"`
	MembersExactlyIn        []string `json:"members_exactly_in,omitempty"`
	MembersIncludeIn        []string `json:"members_include_in,omitempty"`
	QueryType               *string  `json:"query_type,omitempty"`
	CreatedAfter            *int64   `json:"created_after,omitempty"`
	CreatedBefore           *int64   `json:"created_before,omitempty"`
	MetadataKey             *string  `json:"metadata_key,omitempty"`
	MetadataValues          []string `json:"metadata_values,omitempty"`
	MetadataValueStartswith *string  `json:"metadata_value_startswith,omitempty"`
	PublicMode              *string  `json:"public_mode,omitempty"`
	HiddenMode              *string  `json:"hidden_mode,omitempty"`
	UnreadFilter            *string  `json:"unread_filter,omitempty"`
}

// ListMyGroupChannels performs list_my_group_channels: One page of the channels the user joined or is invited to; the cache stores them.
//
// GET /v3/users/{user_id}/my_group_channels.
func (c *Client) ListMyGroupChannels(ctx context.Context, params ListMyGroupChannelsParams) (ChannelListPage, error) {
	return performInto[ChannelListPage](ctx, c, "list_my_group_channels", params)
}

// ListGroupChannelsParams are the parameters of Client.ListGroupChannels, by their wire names (docs/PROTOCOL.md).
type ListGroupChannelsParams struct {
	Token                   *string  `json:"token,omitempty"`
	Limit                   *int64   `json:"limit,omitempty"`
	Order                   *string  `json:"order,omitempty"`
	MetadataOrderKey        *string  `json:"metadata_order_key,omitempty"`
	ShowEmpty               *bool    `json:"show_empty,omitempty"`
	ShowFrozen              *bool    `json:"show_frozen,omitempty"`
	ShowMember              *bool    `json:"show_member,omitempty"`
	ShowMetadata            *bool    `json:"show_metadata,omitempty"`
	ShowMetacounter         *bool    `json:"show_metacounter,omitempty"`
	ShowReadReceipt         *bool    `json:"show_read_receipt,omitempty"`
	ShowDeliveryReceipt     *bool    `json:"show_delivery_receipt,omitempty"`
	DistinctMode            *string  `json:"distinct_mode,omitempty"`
	SuperMode               *string  `json:"super_mode,omitempty"`
	MemberStateFilter       *string  `json:"member_state_filter,omitempty"`
	CustomTypes             []string `json:"custom_types,omitempty"`
	CustomTypeStartswith    *string  `json:"custom_type_startswith,omitempty"`
	ChannelURLs             []string `json:"channel_urls,omitempty"`
	Name                    *string  `json:"name,omitempty"`
	NameContains            *string  `json:"name_contains,omitempty"`
	NameStartswith          *string  `json:"name_startswith,omitempty"`
	MembersExactlyIn        []string `json:"members_exactly_in,omitempty"`
	MembersIncludeIn        []string `json:"members_include_in,omitempty"`
	QueryType               *string  `json:"query_type,omitempty"`
	CreatedAfter            *int64   `json:"created_after,omitempty"`
	CreatedBefore           *int64   `json:"created_before,omitempty"`
	MetadataKey             *string  `json:"metadata_key,omitempty"`
	MetadataValues          []string `json:"metadata_values,omitempty"`
	MetadataValueStartswith *string  `json:"metadata_value_startswith,omitempty"`
	PublicMode              *string  `json:"public_mode,omitempty"`
	PublicMembershipFilter  *string  `json:"public_membership_filter,omitempty"`
}

// ListGroupChannels performs list_group_channels: One page of the channels the user may see (public ones and their own); the cache stores them.
//
// GET /v3/group_channels.
func (c *Client) ListGroupChannels(ctx context.Context, params ListGroupChannelsParams) (ChannelListPage, error) {
	return performInto[ChannelListPage](ctx, c, "list_group_channels", params)
}

// ListPublicGroupChannelsParams are the parameters of Client.ListPublicGroupChannels, by their wire names (docs/PROTOCOL.md).
type ListPublicGroupChannelsParams struct {
	Token                   *string  `json:"token,omitempty"`
	Limit                   *int64   `json:"limit,omitempty"`
	Order                   *string  `json:"order,omitempty"`
	MetadataOrderKey        *string  `json:"metadata_order_key,omitempty"`
	ShowEmpty               *bool    `json:"show_empty,omitempty"` // default false
	ShowFrozen              *bool    `json:"show_frozen,omitempty"`
	ShowMember              *bool    `json:"show_member,omitempty"`
	ShowMetadata            *bool    `json:"show_metadata,omitempty"`
	ShowMetacounter         *bool    `json:"show_metacounter,omitempty"`
	ShowReadReceipt         *bool    `json:"show_read_receipt,omitempty"`
	ShowDeliveryReceipt     *bool    `json:"show_delivery_receipt,omitempty"`
	DistinctMode            *string  `json:"distinct_mode,omitempty"`
	SuperMode               *string  `json:"super_mode,omitempty"`
	MemberStateFilter       *string  `json:"member_state_filter,omitempty"`
	CustomTypes             []string `json:"custom_types,omitempty"`
	CustomTypeStartswith    *string  `json:"custom_type_startswith,omitempty"`
	ChannelURLs             []string `json:"channel_urls,omitempty"`
	Name                    *string  `json:"name,omitempty"`
	NameContains            *string  `json:"name_contains,omitempty"`
	NameStartswith          *string  `json:"name_startswith,omitempty"`
	MembersExactlyIn        []string `json:"members_exactly_in,omitempty"`
	MembersIncludeIn        []string `json:"members_include_in,omitempty"`
	QueryType               *string  `json:"query_type,omitempty"`
	CreatedAfter            *int64   `json:"created_after,omitempty"`
	CreatedBefore           *int64   `json:"created_before,omitempty"`
	MetadataKey             *string  `json:"metadata_key,omitempty"`
	MetadataValues          []string `json:"metadata_values,omitempty"`
	MetadataValueStartswith *string  `json:"metadata_value_startswith,omitempty"`
	PublicMembershipFilter  *string  `json:"public_membership_filter,omitempty"`
}

// ListPublicGroupChannels performs list_public_group_channels: One page of public channels, as the reference SDK's public channel list: empty ones only with show_empty=true, public_membership_filter="joined" for those the user joined; the cache stores them.
//
// GET /v3/group_channels; the library sends show_empty=false unless told otherwise.
func (c *Client) ListPublicGroupChannels(ctx context.Context, params ListPublicGroupChannelsParams) (ChannelListPage, error) {
	return performInto[ChannelListPage](ctx, c, "list_public_group_channels", params)
}

// ListChannelChangelogsParams are the parameters of Client.ListChannelChangelogs, by their wire names (docs/PROTOCOL.md).
type ListChannelChangelogsParams struct {
	UserID              *string  `json:"user_id,omitempty"` // the connected user unless given
	Token               *string  `json:"token,omitempty"`
	ChangeTS            *int64   `json:"change_ts,omitempty"`
	Limit               *int64   `json:"limit,omitempty"`
	ShowMember          *bool    `json:"show_member,omitempty"`
	ShowMetadata        *bool    `json:"show_metadata,omitempty"`
	ShowMetacounter     *bool    `json:"show_metacounter,omitempty"`
	ShowReadReceipt     *bool    `json:"show_read_receipt,omitempty"`
	ShowDeliveryReceipt *bool    `json:"show_delivery_receipt,omitempty"`
	ShowEmpty           *bool    `json:"show_empty,omitempty"`
	ShowFrozen          *bool    `json:"show_frozen,omitempty"`
	CustomTypes         []string `json:"custom_types,omitempty"`
}

// ListChannelChangelogs performs list_channel_changelogs: The user's channels changed or gone since token (or change_ts), applied to the cache like the engine's own catch-up.
//
// GET /v3/users/{user_id}/my_group_channels/changelogs.
func (c *Client) ListChannelChangelogs(ctx context.Context, params ListChannelChangelogsParams) (ChannelChangelogPage, error) {
	return performInto[ChannelChangelogPage](ctx, c, "list_channel_changelogs", params)
}

// CreateGroupChannelParams are the parameters of Client.CreateGroupChannel, by their wire names (docs/PROTOCOL.md).
type CreateGroupChannelParams struct {
	UserIDs       []string `json:"user_ids,omitempty"`
	Name          *string  `json:"name,omitempty"`
	CoverURL      *string  `json:"cover_url,omitempty"`
	CoverFilePath *string  `json:"cover_file_path,omitempty"`
	CustomType    *string  `json:"custom_type,omitempty"`
	Data          *string  `json:"data,omitempty"`
	ChannelURL    *string  `json:"channel_url,omitempty"`
	IsDistinct    *bool    `json:"is_distinct,omitempty"`
	IsSuper       *bool    `json:"is_super,omitempty"`
	IsPublic      *bool    `json:"is_public,omitempty"`
	IsEphemeral   *bool    `json:"is_ephemeral,omitempty"`
	OperatorIDs   []string `json:"operator_ids,omitempty"`
	InviterID     *string  `json:"inviter_id,omitempty"`
	Strict        *bool    `json:"strict,omitempty"`
}

// CreateGroupChannel performs create_group_channel: Creates a channel with the user and user_ids as members; answers it, with is_created. cover_file_path: a local image uploaded as the channel's cover (its cover_url is then the server's copy).
//
// POST /v3/group_channels.
func (c *Client) CreateGroupChannel(ctx context.Context, params CreateGroupChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "create_group_channel", params)
}

// GetGroupChannelParams are the parameters of Client.GetGroupChannel, by their wire names (docs/PROTOCOL.md).
type GetGroupChannelParams struct {
	ChannelURL          string `json:"channel_url,omitempty"` // required
	ShowMember          *bool  `json:"show_member,omitempty"`
	ShowReadReceipt     *bool  `json:"show_read_receipt,omitempty"`
	ShowDeliveryReceipt *bool  `json:"show_delivery_receipt,omitempty"`
	ShowMetadata        *bool  `json:"show_metadata,omitempty"`
	ShowMetacounter     *bool  `json:"show_metacounter,omitempty"`
}

// GetGroupChannel performs get_group_channel: One channel as the user sees it; the cache stores it.
//
// GET /v3/group_channels/{channel_url}.
func (c *Client) GetGroupChannel(ctx context.Context, params GetGroupChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "get_group_channel", params)
}

// UpdateGroupChannelParams are the parameters of Client.UpdateGroupChannel, by their wire names (docs/PROTOCOL.md).
type UpdateGroupChannelParams struct {
	ChannelURL    string   `json:"channel_url,omitempty"` // required
	Name          *string  `json:"name,omitempty"`
	CoverURL      *string  `json:"cover_url,omitempty"`
	CoverFilePath *string  `json:"cover_file_path,omitempty"`
	CustomType    *string  `json:"custom_type,omitempty"`
	Data          *string  `json:"data,omitempty"`
	IsPublic      *bool    `json:"is_public,omitempty"`
	IsDistinct    *bool    `json:"is_distinct,omitempty"`
	OperatorIDs   []string `json:"operator_ids,omitempty"`
}

// UpdateGroupChannel performs update_group_channel: Changes the channel's settings (operators only); operator_ids are added. cover_file_path: a local image uploaded as the new cover, replacing the old one.
//
// PUT /v3/group_channels/{channel_url}.
func (c *Client) UpdateGroupChannel(ctx context.Context, params UpdateGroupChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "update_group_channel", params)
}

// DeleteGroupChannelParams are the parameters of Client.DeleteGroupChannel, by their wire names (docs/PROTOCOL.md).
type DeleteGroupChannelParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// DeleteGroupChannel performs delete_group_channel: Deletes the channel (operators only); it leaves the cache.
//
// DELETE /v3/group_channels/{channel_url}.
func (c *Client) DeleteGroupChannel(ctx context.Context, params DeleteGroupChannelParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_group_channel", params)
}

// InviteUsersParams are the parameters of Client.InviteUsers, by their wire names (docs/PROTOCOL.md).
type InviteUsersParams struct {
	ChannelURL string   `json:"channel_url,omitempty"` // required
	UserIDs    []string `json:"user_ids,omitempty"`    // required
	InviterID  *string  `json:"inviter_id,omitempty"`
}

// InviteUsers performs invite_users: Invites users; those who accept invitations automatically join at once.
//
// POST /v3/group_channels/{channel_url}/invite.
func (c *Client) InviteUsers(ctx context.Context, params InviteUsersParams) (Channel, error) {
	return performInto[Channel](ctx, c, "invite_users", params)
}

// AcceptInvitationParams are the parameters of Client.AcceptInvitation, by their wire names (docs/PROTOCOL.md).
type AcceptInvitationParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
}

// AcceptInvitation performs accept_invitation: Accepts the user's invitation to the channel.
//
// PUT /v3/group_channels/{channel_url}/accept.
func (c *Client) AcceptInvitation(ctx context.Context, params AcceptInvitationParams) (Channel, error) {
	return performInto[Channel](ctx, c, "accept_invitation", params)
}

// DeclineInvitationParams are the parameters of Client.DeclineInvitation, by their wire names (docs/PROTOCOL.md).
type DeclineInvitationParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
}

// DeclineInvitation performs decline_invitation: Declines the user's invitation; the channel leaves the cache.
//
// PUT /v3/group_channels/{channel_url}/decline.
func (c *Client) DeclineInvitation(ctx context.Context, params DeclineInvitationParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "decline_invitation", params)
}

// JoinChannelParams are the parameters of Client.JoinChannel, by their wire names (docs/PROTOCOL.md).
type JoinChannelParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
}

// JoinChannel performs join_channel: Joins a public channel.
//
// PUT /v3/group_channels/{channel_url}/join.
func (c *Client) JoinChannel(ctx context.Context, params JoinChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "join_channel", params)
}

// LeaveChannelParams are the parameters of Client.LeaveChannel, by their wire names (docs/PROTOCOL.md).
type LeaveChannelParams struct {
	ChannelURL     string   `json:"channel_url,omitempty"` // required
	UserIDs        []string `json:"user_ids,omitempty"`
	ShouldLeaveAll *bool    `json:"should_leave_all,omitempty"`
}

// LeaveChannel performs leave_channel: Leaves the channel; it leaves the cache.
//
// PUT /v3/group_channels/{channel_url}/leave.
func (c *Client) LeaveChannel(ctx context.Context, params LeaveChannelParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "leave_channel", params)
}

// FreezeChannelParams are the parameters of Client.FreezeChannel, by their wire names (docs/PROTOCOL.md).
type FreezeChannelParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// FreezeChannel performs freeze_channel: Freezes the channel: only operators may send then (operators only).
//
// PUT /v3/group_channels/{channel_url}/freeze.
func (c *Client) FreezeChannel(ctx context.Context, params FreezeChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "freeze_channel", params)
}

// UnfreezeChannelParams are the parameters of Client.UnfreezeChannel, by their wire names (docs/PROTOCOL.md).
type UnfreezeChannelParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// UnfreezeChannel performs unfreeze_channel: Unfreezes the channel (operators only).
//
// PUT /v3/group_channels/{channel_url}/freeze.
func (c *Client) UnfreezeChannel(ctx context.Context, params UnfreezeChannelParams) (Channel, error) {
	return performInto[Channel](ctx, c, "unfreeze_channel", params)
}

// HideChannelParams are the parameters of Client.HideChannel, by their wire names (docs/PROTOCOL.md).
type HideChannelParams struct {
	ChannelURL           string  `json:"channel_url,omitempty"` // required
	UserID               *string `json:"user_id,omitempty"`
	HidePreviousMessages *bool   `json:"hide_previous_messages,omitempty"`
	AllowAutoUnhide      *bool   `json:"allow_auto_unhide,omitempty"`
	ShouldHideAll        *bool   `json:"should_hide_all,omitempty"`
}

// HideChannel performs hide_channel: Hides the channel from the user's list, with hide_previous_messages also its messages so far.
//
// PUT /v3/group_channels/{channel_url}/hide.
func (c *Client) HideChannel(ctx context.Context, params HideChannelParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "hide_channel", params)
}

// UnhideChannelParams are the parameters of Client.UnhideChannel, by their wire names (docs/PROTOCOL.md).
type UnhideChannelParams struct {
	ChannelURL      string  `json:"channel_url,omitempty"` // required
	UserID          *string `json:"user_id,omitempty"`
	ShouldUnhideAll *bool   `json:"should_unhide_all,omitempty"`
}

// UnhideChannel performs unhide_channel: Shows the hidden channel again.
//
// DELETE /v3/group_channels/{channel_url}/hide.
func (c *Client) UnhideChannel(ctx context.Context, params UnhideChannelParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unhide_channel", params)
}

// ResetMyHistoryParams are the parameters of Client.ResetMyHistory, by their wire names (docs/PROTOCOL.md).
type ResetMyHistoryParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
	ResetAll   *bool   `json:"reset_all,omitempty"`
}

// ResetMyHistory performs reset_my_history: Hides the channel's messages so far from the user: {"ts_message_offset"}.
//
// PUT /v3/group_channels/{channel_url}/reset_user_history.
func (c *Client) ResetMyHistory(ctx context.Context, params ResetMyHistoryParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "reset_my_history", params)
}

// StartTypingParams are the parameters of Client.StartTyping, by their wire names (docs/PROTOCOL.md).
type StartTypingParams struct {
	ChannelURL string   `json:"channel_url,omitempty"` // required
	UserIDs    []string `json:"user_ids,omitempty"`
}

// StartTyping performs start_typing: Tells the channel the user is typing.
//
// POST /v3/group_channels/{channel_url}/typing.
func (c *Client) StartTyping(ctx context.Context, params StartTypingParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "start_typing", params)
}

// EndTypingParams are the parameters of Client.EndTyping, by their wire names (docs/PROTOCOL.md).
type EndTypingParams struct {
	ChannelURL string   `json:"channel_url,omitempty"` // required
	UserIDs    []string `json:"user_ids,omitempty"`
}

// EndTyping performs end_typing: Tells the channel the user stopped typing.
//
// DELETE /v3/group_channels/{channel_url}/typing.
func (c *Client) EndTyping(ctx context.Context, params EndTypingParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "end_typing", params)
}

// MarkAsReadParams are the parameters of Client.MarkAsRead, by their wire names (docs/PROTOCOL.md).
type MarkAsReadParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
}

// MarkAsRead performs mark_as_read: Marks the channel read up to now: {"ts"}.
//
// PUT /v3/group_channels/{channel_url}/messages/mark_as_read.
func (c *Client) MarkAsRead(ctx context.Context, params MarkAsReadParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "mark_as_read", params)
}

// MarkAsDeliveredParams are the parameters of Client.MarkAsDelivered, by their wire names (docs/PROTOCOL.md).
type MarkAsDeliveredParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	UserID     *string `json:"user_id,omitempty"`
}

// MarkAsDelivered performs mark_as_delivered: Marks the channel's messages delivered: {"ts"}.
//
// PUT /v3/group_channels/{channel_url}/messages/mark_as_delivered.
func (c *Client) MarkAsDelivered(ctx context.Context, params MarkAsDeliveredParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "mark_as_delivered", params)
}

// ListMembersParams are the parameters of Client.ListMembers, by their wire names (docs/PROTOCOL.md).
type ListMembersParams struct {
	ChannelURL         string  `json:"channel_url,omitempty"` // required
	Token              *string `json:"token,omitempty"`
	Limit              *int64  `json:"limit,omitempty"`
	Order              *string `json:"order,omitempty"`
	OperatorFilter     *string `json:"operator_filter,omitempty"`
	MemberStateFilter  *string `json:"member_state_filter,omitempty"`
	MutedMemberFilter  *string `json:"muted_member_filter,omitempty"`
	NicknameStartswith *string `json:"nickname_startswith,omitempty"`
}

// ListMembers performs list_members: One page of the channel's members.
//
// GET /v3/group_channels/{channel_url}/members.
func (c *Client) ListMembers(ctx context.Context, params ListMembersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_members", params)
}

// GetMemberStateParams are the parameters of Client.GetMemberState, by their wire names (docs/PROTOCOL.md).
type GetMemberStateParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MemberID   string `json:"member_id,omitempty"`   // required
}

// GetMemberState performs get_member_state: Whether member_id is a member: {"is_member", "state"}.
//
// GET /v3/group_channels/{channel_url}/members/{member_id}.
func (c *Client) GetMemberState(ctx context.Context, params GetMemberStateParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_member_state", params)
}

// ListOperatorsParams are the parameters of Client.ListOperators, by their wire names (docs/PROTOCOL.md).
type ListOperatorsParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	Token      *string `json:"token,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListOperators performs list_operators: One page of the channel's operators: {"operators", "next"}.
//
// GET /v3/group_channels/{channel_url}/operators.
func (c *Client) ListOperators(ctx context.Context, params ListOperatorsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_operators", params)
}

// AddOperatorsParams are the parameters of Client.AddOperators, by their wire names (docs/PROTOCOL.md).
type AddOperatorsParams struct {
	ChannelURL  string   `json:"channel_url,omitempty"`  // required
	OperatorIDs []string `json:"operator_ids,omitempty"` // required
}

// AddOperators performs add_operators: Makes joined members operators (operators only).
//
// POST /v3/group_channels/{channel_url}/operators.
func (c *Client) AddOperators(ctx context.Context, params AddOperatorsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "add_operators", params)
}

// RemoveOperatorsParams are the parameters of Client.RemoveOperators, by their wire names (docs/PROTOCOL.md).
type RemoveOperatorsParams struct {
	ChannelURL  string   `json:"channel_url,omitempty"`  // required
	OperatorIDs []string `json:"operator_ids,omitempty"` // required
}

// RemoveOperators performs remove_operators: Takes the operator role from users (operators only).
//
// DELETE /v3/group_channels/{channel_url}/operators.
func (c *Client) RemoveOperators(ctx context.Context, params RemoveOperatorsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "remove_operators", params)
}

// RemoveAllOperatorsParams are the parameters of Client.RemoveAllOperators, by their wire names (docs/PROTOCOL.md).
type RemoveAllOperatorsParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// RemoveAllOperators performs remove_all_operators: Takes the operator role from every operator (operators only).
//
// DELETE /v3/group_channels/{channel_url}/operators.
func (c *Client) RemoveAllOperators(ctx context.Context, params RemoveAllOperatorsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "remove_all_operators", params)
}

// BanUserParams are the parameters of Client.BanUser, by their wire names (docs/PROTOCOL.md).
type BanUserParams struct {
	ChannelURL  string  `json:"channel_url,omitempty"` // required
	UserID      string  `json:"user_id,omitempty"`     // required
	Seconds     *int64  `json:"seconds,omitempty"`
	Description *string `json:"description,omitempty"`
	AgentID     *string `json:"agent_id,omitempty"`
}

// BanUser performs ban_user: Bans user_id from the channel for seconds (-1, the default: for good); a member is removed (operators only).
//
// POST /v3/group_channels/{channel_url}/ban.
func (c *Client) BanUser(ctx context.Context, params BanUserParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "ban_user", params)
}

// UnbanUserParams are the parameters of Client.UnbanUser, by their wire names (docs/PROTOCOL.md).
type UnbanUserParams struct {
	ChannelURL   string `json:"channel_url,omitempty"`    // required
	TargetUserID string `json:"target_user_id,omitempty"` // required
}

// UnbanUser performs unban_user: Lifts the ban of target_user_id (operators only).
//
// DELETE /v3/group_channels/{channel_url}/ban/{target_user_id}.
func (c *Client) UnbanUser(ctx context.Context, params UnbanUserParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unban_user", params)
}

// GetBanParams are the parameters of Client.GetBan, by their wire names (docs/PROTOCOL.md).
type GetBanParams struct {
	ChannelURL   string `json:"channel_url,omitempty"`    // required
	TargetUserID string `json:"target_user_id,omitempty"` // required
}

// GetBan performs get_ban: Whether target_user_id is banned: {"is_banned", ...}.
//
// GET /v3/group_channels/{channel_url}/ban/{target_user_id}.
func (c *Client) GetBan(ctx context.Context, params GetBanParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_ban", params)
}

// ListBannedUsersParams are the parameters of Client.ListBannedUsers, by their wire names (docs/PROTOCOL.md).
type ListBannedUsersParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	Token      *string `json:"token,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListBannedUsers performs list_banned_users: One page of the channel's bans (operators only): {"banned_list", "next"}.
//
// GET /v3/group_channels/{channel_url}/ban.
func (c *Client) ListBannedUsers(ctx context.Context, params ListBannedUsersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_banned_users", params)
}

// MuteUserParams are the parameters of Client.MuteUser, by their wire names (docs/PROTOCOL.md).
type MuteUserParams struct {
	ChannelURL  string  `json:"channel_url,omitempty"` // required
	UserID      string  `json:"user_id,omitempty"`     // required
	Seconds     *int64  `json:"seconds,omitempty"`
	Description *string `json:"description,omitempty"`
}

// MuteUser performs mute_user: Mutes the member user_id for seconds (-1, the default: until unmuted) (operators only).
//
// POST /v3/group_channels/{channel_url}/mute.
func (c *Client) MuteUser(ctx context.Context, params MuteUserParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "mute_user", params)
}

// UnmuteUserParams are the parameters of Client.UnmuteUser, by their wire names (docs/PROTOCOL.md).
type UnmuteUserParams struct {
	ChannelURL   string `json:"channel_url,omitempty"`    // required
	TargetUserID string `json:"target_user_id,omitempty"` // required
}

// UnmuteUser performs unmute_user: Lifts the mute of target_user_id (operators only).
//
// DELETE /v3/group_channels/{channel_url}/mute/{target_user_id}.
func (c *Client) UnmuteUser(ctx context.Context, params UnmuteUserParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unmute_user", params)
}

// GetMuteParams are the parameters of Client.GetMute, by their wire names (docs/PROTOCOL.md).
type GetMuteParams struct {
	ChannelURL   string `json:"channel_url,omitempty"`    // required
	TargetUserID string `json:"target_user_id,omitempty"` // required
}

// GetMute performs get_mute: Whether target_user_id is muted: {"is_muted", ...}.
//
// GET /v3/group_channels/{channel_url}/mute/{target_user_id}.
func (c *Client) GetMute(ctx context.Context, params GetMuteParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_mute", params)
}

// ListMutedUsersParams are the parameters of Client.ListMutedUsers, by their wire names (docs/PROTOCOL.md).
type ListMutedUsersParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	Token      *string `json:"token,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListMutedUsers performs list_muted_users: One page of the channel's mutes (operators only): {"muted_list", "next"}.
//
// GET /v3/group_channels/{channel_url}/mute.
func (c *Client) ListMutedUsers(ctx context.Context, params ListMutedUsersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_muted_users", params)
}

// ReportChannelParams are the parameters of Client.ReportChannel, by their wire names (docs/PROTOCOL.md).
type ReportChannelParams struct {
	ChannelURL        string  `json:"channel_url,omitempty"`     // required
	ReportCategory    string  `json:"report_category,omitempty"` // required
	ReportingUserID   *string `json:"reporting_user_id,omitempty"`
	ReportDescription *string `json:"report_description,omitempty"`
}

// ReportChannel performs report_channel: Reports the channel; report_category: suspicious, harassing, inappropriate or spam.
//
// POST /v3/report/group_channels/{channel_url}.
func (c *Client) ReportChannel(ctx context.Context, params ReportChannelParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "report_channel", params)
}

// ReportMessageParams are the parameters of Client.ReportMessage, by their wire names (docs/PROTOCOL.md).
type ReportMessageParams struct {
	ChannelURL        string  `json:"channel_url,omitempty"`     // required
	MessageID         int64   `json:"message_id,omitempty"`      // required
	ReportCategory    string  `json:"report_category,omitempty"` // required
	ReportingUserID   *string `json:"reporting_user_id,omitempty"`
	ReportDescription *string `json:"report_description,omitempty"`
}

// ReportMessage performs report_message: Reports a message; report_category: suspicious, harassing, inappropriate or spam.
//
// POST /v3/report/group_channels/{channel_url}/messages/{message_id}.
func (c *Client) ReportMessage(ctx context.Context, params ReportMessageParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "report_message", params)
}

// ReportUserParams are the parameters of Client.ReportUser, by their wire names (docs/PROTOCOL.md).
type ReportUserParams struct {
	OffendingUserID   string  `json:"offending_user_id,omitempty"` // required
	ReportCategory    string  `json:"report_category,omitempty"`   // required
	ChannelURL        *string `json:"channel_url,omitempty"`
	ReportingUserID   *string `json:"reporting_user_id,omitempty"`
	ReportDescription *string `json:"report_description,omitempty"`
}

// ReportUser performs report_user: Reports a user, in the channel channel_url if given; report_category: suspicious, harassing, inappropriate or spam.
//
// POST /v3/report/users/{offending_user_id}.
func (c *Client) ReportUser(ctx context.Context, params ReportUserParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "report_user", params)
}

// GetMetadataParams are the parameters of Client.GetMetadata, by their wire names (docs/PROTOCOL.md).
type GetMetadataParams struct {
	ChannelURL string   `json:"channel_url,omitempty"` // required
	Keys       []string `json:"keys,omitempty"`
}

// GetMetadata performs get_metadata: The channel's metadata (all of it, or keys).
//
// GET /v3/group_channels/{channel_url}/metadata.
func (c *Client) GetMetadata(ctx context.Context, params GetMetadataParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_metadata", params)
}

// CreateMetadataParams are the parameters of Client.CreateMetadata, by their wire names (docs/PROTOCOL.md).
type CreateMetadataParams struct {
	ChannelURL string            `json:"channel_url,omitempty"` // required
	Metadata   map[string]string `json:"metadata,omitempty"`    // required
	IncludeTS  *bool             `json:"include_ts,omitempty"`
}

// CreateMetadata performs create_metadata: Adds metadata keys (a key that exists is an error); answers them.
//
// POST /v3/group_channels/{channel_url}/metadata.
func (c *Client) CreateMetadata(ctx context.Context, params CreateMetadataParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "create_metadata", params)
}

// UpdateMetadataParams are the parameters of Client.UpdateMetadata, by their wire names (docs/PROTOCOL.md).
type UpdateMetadataParams struct {
	ChannelURL string            `json:"channel_url,omitempty"` // required
	Metadata   map[string]string `json:"metadata,omitempty"`    // required
	Upsert     *bool             `json:"upsert,omitempty"`
}

// UpdateMetadata performs update_metadata: Changes metadata values (upsert adds missing keys); answers them.
//
// PUT /v3/group_channels/{channel_url}/metadata.
func (c *Client) UpdateMetadata(ctx context.Context, params UpdateMetadataParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "update_metadata", params)
}

// DeleteMetadataParams are the parameters of Client.DeleteMetadata, by their wire names (docs/PROTOCOL.md).
type DeleteMetadataParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	Key        string `json:"key,omitempty"`         // required
}

// DeleteMetadata performs delete_metadata: Removes the metadata key key.
//
// DELETE /v3/group_channels/{channel_url}/metadata/{key}.
func (c *Client) DeleteMetadata(ctx context.Context, params DeleteMetadataParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_metadata", params)
}

// DeleteAllMetadataParams are the parameters of Client.DeleteAllMetadata, by their wire names (docs/PROTOCOL.md).
type DeleteAllMetadataParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// DeleteAllMetadata performs delete_all_metadata: Removes every metadata key.
//
// DELETE /v3/group_channels/{channel_url}/metadata.
func (c *Client) DeleteAllMetadata(ctx context.Context, params DeleteAllMetadataParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_all_metadata", params)
}

// GetMetacountersParams are the parameters of Client.GetMetacounters, by their wire names (docs/PROTOCOL.md).
type GetMetacountersParams struct {
	ChannelURL string   `json:"channel_url,omitempty"` // required
	Keys       []string `json:"keys,omitempty"`
}

// GetMetacounters performs get_metacounters: The channel's metacounters (all of them, or keys).
//
// GET /v3/group_channels/{channel_url}/metacounter.
func (c *Client) GetMetacounters(ctx context.Context, params GetMetacountersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_metacounters", params)
}

// CreateMetacountersParams are the parameters of Client.CreateMetacounters, by their wire names (docs/PROTOCOL.md).
type CreateMetacountersParams struct {
	ChannelURL  string           `json:"channel_url,omitempty"` // required
	Metacounter map[string]int64 `json:"metacounter,omitempty"` // required
}

// CreateMetacounters performs create_metacounters: Adds metacounters (a key that exists is an error); answers them.
//
// POST /v3/group_channels/{channel_url}/metacounter.
func (c *Client) CreateMetacounters(ctx context.Context, params CreateMetacountersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "create_metacounters", params)
}

// UpdateMetacountersParams are the parameters of Client.UpdateMetacounters, by their wire names (docs/PROTOCOL.md).
type UpdateMetacountersParams struct {
	ChannelURL  string           `json:"channel_url,omitempty"` // required
	Metacounter map[string]int64 `json:"metacounter,omitempty"` // required
	Mode        *string          `json:"mode,omitempty"`
	Upsert      *bool            `json:"upsert,omitempty"`
}

// UpdateMetacounters performs update_metacounters: Sets, increases or decreases metacounters (mode: set, increase, decrease); answers them.
//
// PUT /v3/group_channels/{channel_url}/metacounter.
func (c *Client) UpdateMetacounters(ctx context.Context, params UpdateMetacountersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "update_metacounters", params)
}

// DeleteMetacounterParams are the parameters of Client.DeleteMetacounter, by their wire names (docs/PROTOCOL.md).
type DeleteMetacounterParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	Key        string `json:"key,omitempty"`         // required
}

// DeleteMetacounter performs delete_metacounter: Removes the metacounter key.
//
// DELETE /v3/group_channels/{channel_url}/metacounter/{key}.
func (c *Client) DeleteMetacounter(ctx context.Context, params DeleteMetacounterParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_metacounter", params)
}

// DeleteAllMetacountersParams are the parameters of Client.DeleteAllMetacounters, by their wire names (docs/PROTOCOL.md).
type DeleteAllMetacountersParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// DeleteAllMetacounters performs delete_all_metacounters: Removes every metacounter.
//
// DELETE /v3/group_channels/{channel_url}/metacounter.
func (c *Client) DeleteAllMetacounters(ctx context.Context, params DeleteAllMetacountersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_all_metacounters", params)
}

// ListMessagesParams are the parameters of Client.ListMessages, by their wire names (docs/PROTOCOL.md).
type ListMessagesParams struct {
	ChannelURL               string   `json:"channel_url,omitempty"` // required
	MessageTS                *int64   `json:"message_ts,omitempty"`
	MessageID                *int64   `json:"message_id,omitempty"`
	PrevLimit                *int64   `json:"prev_limit,omitempty"`
	NextLimit                *int64   `json:"next_limit,omitempty"`
	Include                  *bool    `json:"include,omitempty"` // default false
	Reverse                  *bool    `json:"reverse,omitempty"`
	MessageType              *string  `json:"message_type,omitempty"`
	CustomTypes              []string `json:"custom_types,omitempty"`
	SenderIDs                []string `json:"sender_ids,omitempty"`
	IncludeReplyType         *string  `json:"include_reply_type,omitempty"`
	IncludeReactions         *bool    `json:"include_reactions,omitempty"`
	IncludeThreadInfo        *bool    `json:"include_thread_info,omitempty"`
	IncludeParentMessageInfo *bool    `json:"include_parent_message_info,omitempty"`
	WithSortedMetaArray      *bool    `json:"with_sorted_meta_array,omitempty"`
	IncludeMetaArray         *bool    `json:"include_meta_array,omitempty"`
}

// ListMessages performs list_messages: Messages around an anchor (message_ts or message_id; the newest end without one); the cache stores them. As the reference SDK: the anchor's own messages only with include=true, and message_type also by the collections' names "all", "user", "file", "admin".
//
// GET /v3/group_channels/{channel_url}/messages; the library sends include=false unless told otherwise.
func (c *Client) ListMessages(ctx context.Context, params ListMessagesParams) (MessageListPage, error) {
	return performInto[MessageListPage](ctx, c, "list_messages", params)
}

// ListThreadRepliesParams are the parameters of Client.ListThreadReplies, by their wire names (docs/PROTOCOL.md).
type ListThreadRepliesParams struct {
	ChannelURL               string   `json:"channel_url,omitempty"`       // required
	ParentMessageID          int64    `json:"parent_message_id,omitempty"` // required
	MessageTS                *int64   `json:"message_ts,omitempty"`
	MessageID                *int64   `json:"message_id,omitempty"`
	PrevLimit                *int64   `json:"prev_limit,omitempty"`
	NextLimit                *int64   `json:"next_limit,omitempty"`
	Include                  *bool    `json:"include,omitempty"` // default false
	Reverse                  *bool    `json:"reverse,omitempty"`
	MessageType              *string  `json:"message_type,omitempty"`
	CustomTypes              []string `json:"custom_types,omitempty"`
	SenderIDs                []string `json:"sender_ids,omitempty"`
	IncludeReplyType         *string  `json:"include_reply_type,omitempty"`
	IncludeReactions         *bool    `json:"include_reactions,omitempty"`
	IncludeThreadInfo        *bool    `json:"include_thread_info,omitempty"`
	IncludeParentMessageInfo *bool    `json:"include_parent_message_info,omitempty"`
	WithSortedMetaArray      *bool    `json:"with_sorted_meta_array,omitempty"`
	IncludeMetaArray         *bool    `json:"include_meta_array,omitempty"`
}

// ListThreadReplies performs list_thread_replies: The replies to parent_message_id around an anchor, as list_messages.
//
// GET /v3/group_channels/{channel_url}/messages; the library sends include=false unless told otherwise.
func (c *Client) ListThreadReplies(ctx context.Context, params ListThreadRepliesParams) (MessageListPage, error) {
	return performInto[MessageListPage](ctx, c, "list_thread_replies", params)
}

// GetTotalMessageCountParams are the parameters of Client.GetTotalMessageCount, by their wire names (docs/PROTOCOL.md).
type GetTotalMessageCountParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
}

// GetTotalMessageCount performs get_total_message_count: How many messages the channel holds: {"total"}.
//
// GET /v3/group_channels/{channel_url}/messages/total_count.
func (c *Client) GetTotalMessageCount(ctx context.Context, params GetTotalMessageCountParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_total_message_count", params)
}

// ListMessageChangelogsParams are the parameters of Client.ListMessageChangelogs, by their wire names (docs/PROTOCOL.md).
type ListMessageChangelogsParams struct {
	ChannelURL               string   `json:"channel_url,omitempty"` // required
	Token                    *string  `json:"token,omitempty"`
	ChangeTS                 *int64   `json:"change_ts,omitempty"`
	Limit                    *int64   `json:"limit,omitempty"`
	MessageType              *string  `json:"message_type,omitempty"`
	CustomTypes              []string `json:"custom_types,omitempty"`
	SenderIDs                []string `json:"sender_ids,omitempty"`
	IncludeReplyType         *string  `json:"include_reply_type,omitempty"`
	IncludeReactions         *bool    `json:"include_reactions,omitempty"`
	IncludeThreadInfo        *bool    `json:"include_thread_info,omitempty"`
	IncludeParentMessageInfo *bool    `json:"include_parent_message_info,omitempty"`
	WithSortedMetaArray      *bool    `json:"with_sorted_meta_array,omitempty"`
	IncludeMetaArray         *bool    `json:"include_meta_array,omitempty"`
}

// ListMessageChangelogs performs list_message_changelogs: The channel's messages changed or deleted since token (or change_ts), applied to the cache.
//
// GET /v3/group_channels/{channel_url}/messages/changelogs.
func (c *Client) ListMessageChangelogs(ctx context.Context, params ListMessageChangelogsParams) (MessageChangelogPage, error) {
	return performInto[MessageChangelogPage](ctx, c, "list_message_changelogs", params)
}

// GetMessageParams are the parameters of Client.GetMessage, by their wire names (docs/PROTOCOL.md).
type GetMessageParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MessageID  int64  `json:"message_id,omitempty"`  // required
}

// GetMessage performs get_message: One message; the cache stores it.
//
// GET /v3/group_channels/{channel_url}/messages/{message_id}.
func (c *Client) GetMessage(ctx context.Context, params GetMessageParams) (Message, error) {
	return performInto[Message](ctx, c, "get_message", params)
}

// UpdateMessageParams are the parameters of Client.UpdateMessage, by their wire names (docs/PROTOCOL.md).
type UpdateMessageParams struct {
	ChannelURL       string          `json:"channel_url,omitempty"` // required
	MessageID        int64           `json:"message_id,omitempty"`  // required
	MessageType      *string         `json:"message_type,omitempty"`
	Message          *string         `json:"message,omitempty"`
	CustomType       *string         `json:"custom_type,omitempty"`
	Data             *string         `json:"data,omitempty"`
	MentionType      *string         `json:"mention_type,omitempty"`
	MentionedUserIDs []string        `json:"mentioned_user_ids,omitempty"`
	SortedMetaarray  []MetaArrayItem `json:"sorted_metaarray,omitempty"`
	URL              *string         `json:"url,omitempty"`
}

// UpdateMessage performs update_message: Edits a message (its sender or an operator).
//
// PUT /v3/group_channels/{channel_url}/messages/{message_id}.
func (c *Client) UpdateMessage(ctx context.Context, params UpdateMessageParams) (Message, error) {
	return performInto[Message](ctx, c, "update_message", params)
}

// DeleteMessageParams are the parameters of Client.DeleteMessage, by their wire names (docs/PROTOCOL.md).
type DeleteMessageParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MessageID  int64  `json:"message_id,omitempty"`  // required
}

// DeleteMessage performs delete_message: Deletes a message (its sender or an operator); it leaves the cache.
//
// DELETE /v3/group_channels/{channel_url}/messages/{message_id}.
func (c *Client) DeleteMessage(ctx context.Context, params DeleteMessageParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_message", params)
}

// CopyMessageParams are the parameters of Client.CopyMessage, by their wire names (docs/PROTOCOL.md).
type CopyMessageParams struct {
	ChannelURL     string `json:"channel_url,omitempty"`      // required
	MessageID      int64  `json:"message_id,omitempty"`       // required
	DestChannelURL string `json:"dest_channel_url,omitempty"` // required
}

// CopyMessage performs copy_message: Copies a message (its sender only) into dest_channel_url; answers the copy.
//
// POST /v3/group_channels/{channel_url}/messages/{message_id}/copy.
func (c *Client) CopyMessage(ctx context.Context, params CopyMessageParams) (Message, error) {
	return performInto[Message](ctx, c, "copy_message", params)
}

// AddReactionParams are the parameters of Client.AddReaction, by their wire names (docs/PROTOCOL.md).
type AddReactionParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	MessageID  int64   `json:"message_id,omitempty"`  // required
	Reaction   string  `json:"reaction,omitempty"`    // required
	UserID     *string `json:"user_id,omitempty"`
}

// AddReaction performs add_reaction: Adds the user's reaction to a message.
//
// POST /v3/group_channels/{channel_url}/messages/{message_id}/reactions.
func (c *Client) AddReaction(ctx context.Context, params AddReactionParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "add_reaction", params)
}

// RemoveReactionParams are the parameters of Client.RemoveReaction, by their wire names (docs/PROTOCOL.md).
type RemoveReactionParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	MessageID  int64   `json:"message_id,omitempty"`  // required
	Reaction   string  `json:"reaction,omitempty"`    // required
	UserID     *string `json:"user_id,omitempty"`
}

// RemoveReaction performs remove_reaction: Removes the user's reaction from a message.
//
// DELETE /v3/group_channels/{channel_url}/messages/{message_id}/reactions.
func (c *Client) RemoveReaction(ctx context.Context, params RemoveReactionParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "remove_reaction", params)
}

// ListReactionsParams are the parameters of Client.ListReactions, by their wire names (docs/PROTOCOL.md).
type ListReactionsParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MessageID  int64  `json:"message_id,omitempty"`  // required
}

// ListReactions performs list_reactions: The reactions to a message: {"reactions"}.
//
// GET /v3/group_channels/{channel_url}/messages/{message_id}/reactions.
func (c *Client) ListReactions(ctx context.Context, params ListReactionsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_reactions", params)
}

// TranslateMessageParams are the parameters of Client.TranslateMessage, by their wire names (docs/PROTOCOL.md).
type TranslateMessageParams struct {
	ChannelURL      string   `json:"channel_url,omitempty"` // required
	MessageID       int64    `json:"message_id,omitempty"`  // required
	TargetLanguages []string `json:"target_languages,omitempty"`
}

// TranslateMessage performs translate_message: Translates a user message into target_languages (default: the user's preferred languages) through the server's translator; answers the message with its translations, which a cached copy takes.
//
// POST /v3/group_channels/{channel_url}/messages/{message_id}/translation.
func (c *Client) TranslateMessage(ctx context.Context, params TranslateMessageParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "translate_message", params)
}

// PinMessageParams are the parameters of Client.PinMessage, by their wire names (docs/PROTOCOL.md).
type PinMessageParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MessageID  int64  `json:"message_id,omitempty"`  // required
}

// PinMessage performs pin_message: Pins a message to the channel.
//
// POST /v3/group_channels/{channel_url}/messages/{message_id}/pin.
func (c *Client) PinMessage(ctx context.Context, params PinMessageParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "pin_message", params)
}

// UnpinMessageParams are the parameters of Client.UnpinMessage, by their wire names (docs/PROTOCOL.md).
type UnpinMessageParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	MessageID  int64  `json:"message_id,omitempty"`  // required
}

// UnpinMessage performs unpin_message: Unpins a message.
//
// DELETE /v3/group_channels/{channel_url}/messages/{message_id}/pin.
func (c *Client) UnpinMessage(ctx context.Context, params UnpinMessageParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "unpin_message", params)
}

// AddMessageMetaArrayParams are the parameters of Client.AddMessageMetaArray, by their wire names (docs/PROTOCOL.md).
type AddMessageMetaArrayParams struct {
	ChannelURL      string          `json:"channel_url,omitempty"`      // required
	MessageID       int64           `json:"message_id,omitempty"`       // required
	SortedMetaarray []MetaArrayItem `json:"sorted_metaarray,omitempty"` // required
}

// AddMessageMetaArray performs add_message_meta_array: Adds keys to a message's sorted meta array, or values to its keys; answers the message.
//
// POST /v3/group_channels/{channel_url}/messages/{message_id}/sorted_metaarray.
func (c *Client) AddMessageMetaArray(ctx context.Context, params AddMessageMetaArrayParams) (Message, error) {
	return performInto[Message](ctx, c, "add_message_meta_array", params)
}

// UpdateMessageMetaArrayParams are the parameters of Client.UpdateMessageMetaArray, by their wire names (docs/PROTOCOL.md).
type UpdateMessageMetaArrayParams struct {
	ChannelURL      string          `json:"channel_url,omitempty"`      // required
	MessageID       int64           `json:"message_id,omitempty"`       // required
	SortedMetaarray []MetaArrayItem `json:"sorted_metaarray,omitempty"` // required
	Mode            *string         `json:"mode,omitempty"`
	Upsert          *bool           `json:"upsert,omitempty"`
}

// UpdateMessageMetaArray performs update_message_meta_array: Adds or removes (mode) values of a message's sorted meta array; answers the message.
//
// PUT /v3/group_channels/{channel_url}/messages/{message_id}/sorted_metaarray.
func (c *Client) UpdateMessageMetaArray(ctx context.Context, params UpdateMessageMetaArrayParams) (Message, error) {
	return performInto[Message](ctx, c, "update_message_meta_array", params)
}

// CreatePollParams are the parameters of Client.CreatePoll, by their wire names (docs/PROTOCOL.md).
type CreatePollParams struct {
	ChannelURL          string   `json:"channel_url,omitempty"` // required
	Title               string   `json:"title,omitempty"`       // required
	Options             []string `json:"options,omitempty"`     // required
	AllowUserSuggestion *bool    `json:"allow_user_suggestion,omitempty"`
	AllowMultipleVotes  *bool    `json:"allow_multiple_votes,omitempty"`
	CloseAt             *int64   `json:"close_at,omitempty"`
	UserID              *string  `json:"user_id,omitempty"`
}

// CreatePoll performs create_poll: Creates a poll in the channel; send a message with its poll_id to show it.
//
// POST /v3/group_channels/{channel_url}/polls.
func (c *Client) CreatePoll(ctx context.Context, params CreatePollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "create_poll", params)
}

// ListPollsParams are the parameters of Client.ListPolls, by their wire names (docs/PROTOCOL.md).
type ListPollsParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	Token      *string `json:"token,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListPolls performs list_polls: The channel's polls, newest first: {"polls", "next"}.
//
// GET /v3/group_channels/{channel_url}/polls.
func (c *Client) ListPolls(ctx context.Context, params ListPollsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_polls", params)
}

// GetPollParams are the parameters of Client.GetPoll, by their wire names (docs/PROTOCOL.md).
type GetPollParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	PollID     int64  `json:"poll_id,omitempty"`     // required
}

// GetPoll performs get_poll: One poll, with the user's votes.
//
// GET /v3/group_channels/{channel_url}/polls/{poll_id}.
func (c *Client) GetPoll(ctx context.Context, params GetPollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "get_poll", params)
}

// UpdatePollParams are the parameters of Client.UpdatePoll, by their wire names (docs/PROTOCOL.md).
type UpdatePollParams struct {
	ChannelURL          string  `json:"channel_url,omitempty"` // required
	PollID              int64   `json:"poll_id,omitempty"`     // required
	Title               *string `json:"title,omitempty"`
	AllowUserSuggestion *bool   `json:"allow_user_suggestion,omitempty"`
	AllowMultipleVotes  *bool   `json:"allow_multiple_votes,omitempty"`
	CloseAt             *int64  `json:"close_at,omitempty"`
}

// UpdatePoll performs update_poll: Changes a poll's title, options' rules or closing time (its creator or an operator).
//
// PUT /v3/group_channels/{channel_url}/polls/{poll_id}.
func (c *Client) UpdatePoll(ctx context.Context, params UpdatePollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "update_poll", params)
}

// DeletePollParams are the parameters of Client.DeletePoll, by their wire names (docs/PROTOCOL.md).
type DeletePollParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	PollID     int64  `json:"poll_id,omitempty"`     // required
}

// DeletePoll performs delete_poll: Deletes a poll (its creator or an operator); its message stays.
//
// DELETE /v3/group_channels/{channel_url}/polls/{poll_id}.
func (c *Client) DeletePoll(ctx context.Context, params DeletePollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_poll", params)
}

// ClosePollParams are the parameters of Client.ClosePoll, by their wire names (docs/PROTOCOL.md).
type ClosePollParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	PollID     int64  `json:"poll_id,omitempty"`     // required
}

// ClosePoll performs close_poll: Closes a poll: it takes no more votes.
//
// PUT /v3/group_channels/{channel_url}/polls/{poll_id}/close.
func (c *Client) ClosePoll(ctx context.Context, params ClosePollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "close_poll", params)
}

// AddPollOptionParams are the parameters of Client.AddPollOption, by their wire names (docs/PROTOCOL.md).
type AddPollOptionParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	PollID     int64   `json:"poll_id,omitempty"`     // required
	Text       string  `json:"text,omitempty"`        // required
	UserID     *string `json:"user_id,omitempty"`
}

// AddPollOption performs add_poll_option: Adds an option to a poll.
//
// POST /v3/group_channels/{channel_url}/polls/{poll_id}/options.
func (c *Client) AddPollOption(ctx context.Context, params AddPollOptionParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "add_poll_option", params)
}

// UpdatePollOptionParams are the parameters of Client.UpdatePollOption, by their wire names (docs/PROTOCOL.md).
type UpdatePollOptionParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	PollID     int64  `json:"poll_id,omitempty"`     // required
	OptionID   int64  `json:"option_id,omitempty"`   // required
	Text       string `json:"text,omitempty"`        // required
}

// UpdatePollOption performs update_poll_option: Changes an option's text.
//
// PUT /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}.
func (c *Client) UpdatePollOption(ctx context.Context, params UpdatePollOptionParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "update_poll_option", params)
}

// DeletePollOptionParams are the parameters of Client.DeletePollOption, by their wire names (docs/PROTOCOL.md).
type DeletePollOptionParams struct {
	ChannelURL string `json:"channel_url,omitempty"` // required
	PollID     int64  `json:"poll_id,omitempty"`     // required
	OptionID   int64  `json:"option_id,omitempty"`   // required
}

// DeletePollOption performs delete_poll_option: Deletes an option and its votes.
//
// DELETE /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}.
func (c *Client) DeletePollOption(ctx context.Context, params DeletePollOptionParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "delete_poll_option", params)
}

// VotePollParams are the parameters of Client.VotePoll, by their wire names (docs/PROTOCOL.md).
type VotePollParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	PollID     int64   `json:"poll_id,omitempty"`     // required
	OptionIDs  []int64 `json:"option_ids,omitempty"`  // required
	UserID     *string `json:"user_id,omitempty"`
}

// VotePoll performs vote_poll: Replaces the user's votes of a poll with option_ids ([] retracts them).
//
// PUT /v3/group_channels/{channel_url}/polls/{poll_id}/vote.
func (c *Client) VotePoll(ctx context.Context, params VotePollParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "vote_poll", params)
}

// ListPollVotersParams are the parameters of Client.ListPollVoters, by their wire names (docs/PROTOCOL.md).
type ListPollVotersParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	PollID     int64   `json:"poll_id,omitempty"`     // required
	OptionID   int64   `json:"option_id,omitempty"`   // required
	Token      *string `json:"token,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListPollVoters performs list_poll_voters: Who voted for an option: {"vote_count", "voters", "next"}.
//
// GET /v3/group_channels/{channel_url}/polls/{poll_id}/options/{option_id}/voters.
func (c *Client) ListPollVoters(ctx context.Context, params ListPollVotersParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_poll_voters", params)
}

// ListPollChangelogsParams are the parameters of Client.ListPollChangelogs, by their wire names (docs/PROTOCOL.md).
type ListPollChangelogsParams struct {
	ChannelURL string  `json:"channel_url,omitempty"` // required
	Token      *string `json:"token,omitempty"`
	ChangeTS   *int64  `json:"change_ts,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
}

// ListPollChangelogs performs list_poll_changelogs: The channel's polls changed or deleted since token (or change_ts), applied to the cache.
//
// GET /v3/group_channels/{channel_url}/polls/changelogs.
func (c *Client) ListPollChangelogs(ctx context.Context, params ListPollChangelogsParams) (json.RawMessage, error) {
	return performInto[json.RawMessage](ctx, c, "list_poll_changelogs", params)
}
