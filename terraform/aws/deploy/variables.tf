# The provider's own setting (not a module input).
variable "api_max_retries" {
  type        = number
  default     = null
  description = "How often the AWS provider retries a failed API call (provider max_retries; null: its default, 25). It retries InsufficientInstanceCapacity on RunInstances too, for minutes at 25, before the launcher can try the next zone."
  validation {
    condition     = var.api_max_retries == null || try(var.api_max_retries >= 0 && var.api_max_retries <= 100 && floor(var.api_max_retries) == var.api_max_retries, false)
    error_message = "api_max_retries: a whole number from 0 to 100 (or null)."
  }
}
