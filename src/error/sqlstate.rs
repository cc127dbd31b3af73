//! SQLSTATE codes saql answers with, named as PostgreSQL's `errcodes.txt` names them so a
//! reader sees the condition, not five characters.

/// `01000`.
pub const WARNING: &str = "01000";
/// `08P01`.
pub const PROTOCOL_VIOLATION: &str = "08P01";
/// `0A000`.
pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
/// `22000`.
pub const DATA_EXCEPTION: &str = "22000";
/// `22003`.
pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
/// `22012`.
pub const DIVISION_BY_ZERO: &str = "22012";
/// `2201B`.
pub const INVALID_REGULAR_EXPRESSION: &str = "2201B";
/// `2201F`.
pub const INVALID_ARGUMENT_FOR_POWER_FUNCTION: &str = "2201F";
/// `22007`.
pub const INVALID_DATETIME_FORMAT: &str = "22007";
/// `22008`.
pub const DATETIME_FIELD_OVERFLOW: &str = "22008";
/// `22021`.
pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
/// `22023`.
pub const INVALID_PARAMETER_VALUE: &str = "22023";
/// `22P02`.
pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
/// `22P03`.
pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
/// `22P04`.
pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
/// `21000`.
pub const CARDINALITY_VIOLATION: &str = "21000";
/// `23502`.
pub const NOT_NULL_VIOLATION: &str = "23502";
/// `23505`.
pub const UNIQUE_VIOLATION: &str = "23505";
/// `26000`.
pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// `28000`.
pub const INVALID_AUTHORIZATION_SPECIFICATION: &str = "28000";
/// `28P01`.
pub const INVALID_PASSWORD: &str = "28P01";
/// `2BP01`.
pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
/// `34000`.
pub const INVALID_CURSOR_NAME: &str = "34000";
/// `42501`.
pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
/// `42601`.
pub const SYNTAX_ERROR: &str = "42601";
/// `42622`.
pub const NAME_TOO_LONG: &str = "42622";
/// `42701`.
pub const DUPLICATE_COLUMN: &str = "42701";
/// `42712`.
pub const DUPLICATE_ALIAS: &str = "42712";
/// `42702`.
pub const AMBIGUOUS_COLUMN: &str = "42702";
/// `42703`.
pub const UNDEFINED_COLUMN: &str = "42703";
/// `42803`.
pub const GROUPING_ERROR: &str = "42803";
/// `42804`.
pub const DATATYPE_MISMATCH: &str = "42804";
/// `42883`.
pub const UNDEFINED_FUNCTION: &str = "42883";
/// `42939`.
pub const RESERVED_NAME: &str = "42939";
/// `42P01`.
pub const UNDEFINED_TABLE: &str = "42P01";
/// `42P02`.
pub const UNDEFINED_PARAMETER: &str = "42P02";
/// `42P03`.
pub const DUPLICATE_CURSOR: &str = "42P03";
/// `42P05`.
pub const DUPLICATE_PSTATEMENT: &str = "42P05";
/// `42P07`.
pub const DUPLICATE_TABLE: &str = "42P07";
/// `42P10`.
pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
/// `42P16`.
pub const INVALID_TABLE_DEFINITION: &str = "42P16";
/// `42P17`.
pub const INVALID_OBJECT_DEFINITION: &str = "42P17";
/// `42P20`.
pub const WINDOWING_ERROR: &str = "42P20";
/// `53100`.
pub const DISK_FULL: &str = "53100";
/// `53200`.
pub const OUT_OF_MEMORY: &str = "53200";
/// `53300`.
pub const TOO_MANY_CONNECTIONS: &str = "53300";
/// `53400`.
pub const CONFIGURATION_LIMIT_EXCEEDED: &str = "53400";
/// `54000`.
pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
/// `54001`.
pub const STATEMENT_TOO_COMPLEX: &str = "54001";
/// `55006`.
pub const OBJECT_IN_USE: &str = "55006";
/// The object is not in the state the statement needs (PostgreSQL's
/// `object_not_in_prerequisite_state`).
pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
/// `57014`.
pub const QUERY_CANCELED: &str = "57014";
/// `57P01`.
pub const ADMIN_SHUTDOWN: &str = "57P01";
/// `57P05`.
pub const IDLE_SESSION_TIMEOUT: &str = "57P05";
/// `58030`.
pub const IO_ERROR: &str = "58030";
/// `58P01`.
pub const UNDEFINED_FILE: &str = "58P01";
/// `XX000`.
pub const INTERNAL_ERROR: &str = "XX000";
